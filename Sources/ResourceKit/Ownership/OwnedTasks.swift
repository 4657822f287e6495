/// Background work an object owns: each task is recorded until it ends, and ``waitForAll()`` awaits every
/// one (the owner's shutdown). Nothing started through it outlives the owner's close (Docs/Architecture.md,
/// "Nothing outlives its owner").
///
/// The package's one primitive for its own background work: the registry's closes of abandoned resources, a
/// pool's cleanup of returned connections, a listener's reader, a cancel channel's statements. Applications
/// use `ResourceOwner` (module `ResourceKitPatterns`), which adds keys, shutdown grace and a watchdog.
package final class OwnedTasks: Sendable {
    private struct State: Sendable {
        var running: [UInt64: Task<Void, Never>] = [:]
        /// Tasks that ended before they were recorded.
        var endedEarly: Set<UInt64> = []
        var next: UInt64 = 0
    }

    private let state = Locked(State())

    /// An empty set.
    package init() {}

    /// Number of tasks still running.
    package var count: Int { state.withLock { $0.running.count } }

    /// Starts `work` on a task this set owns; the task prefers `executor` when one is given (`nil`: the
    /// cooperative pool).
    package func start(preferring executor: (any TaskExecutor)? = nil, _ work: @escaping @Sendable () async -> Void) {
        let id = state.withLock { state -> UInt64 in
            state.next += 1
            return state.next
        }
        // Owned: recorded below before anyone can wait for it, removed by itself when it ends.
        // The work is the owner's, not the caller's: no scope or operation of the task that started it reaches it.
        let task = Task(executorPreference: executor) {
            await withoutResourceScope { await work() }
            self.state.withLock { state in
                if state.running.removeValue(forKey: id) == nil { state.endedEarly.insert(id) }
            }
        }
        state.withLock { state in
            if state.endedEarly.remove(id) == nil { state.running[id] = task }
        }
    }

    /// Waits until every task (including ones started meanwhile) ended.
    package func waitForAll() async {
        while true {
            let running = state.withLock { Array($0.running.values) }
            if running.isEmpty { return }
            for task in running { await task.value }
        }
    }
}
