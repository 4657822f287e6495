public import ResourceKit
import Synchronization

/// What a running interruptible call sees of its cancellation: a flag it may poll. A library with a progress
/// callback (SQLite's `sqlite3_progress_handler`) answers "stop" while it is set; that never misses a cancel that
/// landed after the pool's thread picked the call up but before the library started (where SQLite clears a
/// pending `sqlite3_interrupt`). One per call: it never reaches the next call.
public final class BlockingCallInterruption: Sendable {
    private let flag = Atomic<Bool>(false)

    init() {}

    /// `true` once a cancel reached this call while it ran. Any thread; one atomic load.
    public var isRequested: Bool { flag.load(ordering: .acquiring) }

    func request() { flag.store(true, ordering: .releasing) }
}

extension BlockingPool {
    /// Runs a blocking C call on a pool thread; to cancel it, calls `interrupt` while (and only while) that call
    /// runs.
    ///
    /// For libraries with a native cancel that must be called from another thread while the call blocks:
    /// `sqlite3_interrupt`, `PQcancel`, `curl`'s progress callback, `pthread_kill` on a thread in `read`.
    ///
    /// Cancellation (the task, `handle`, its scope or `deadline`):
    /// - before a thread picked the call up: it never runs, and the wait throws at once;
    /// - while it runs: `interruption.isRequested` becomes `true`, `interrupt` is called, and called again (after
    ///   1 ms, doubling, at most every 64 ms) until the call returns, so a cancel that lands just before the
    ///   library starts (and that the library clears) is not lost. The wait ends when the call returns: a library
    ///   handle is never used by two calls at once. If the call then failed, the cancel's error is thrown
    ///   (`CancellationError`, `DeadlineExceededError`); if it finished anyway, its result is returned;
    /// - after it returned: nothing happens.
    ///
    /// `interrupt` runs on the canceller's thread (or the timers' thread, for a redelivery) *under the call's
    /// lock*, so that it can never run after the call returned and reach the next call on the same handle. It
    /// must be short, non-blocking and thread-safe, and must not call into this pool. Inside `call`, leave the
    /// library with nothing running before returning (SQLite: `sqlite3_reset` the statement): an interrupt
    /// delivered in the moment between the library's return and the call's is then a no-op.
    ///
    /// For a library that must stay on one thread, run its calls on a pool of its own
    /// (``dedicatedThread(name:)``), owned and shut down with the resource.
    ///
    /// - Throws: `CancellationError`, `DeadlineExceededError`, `ResourceKitError.Code.blockingPoolFull`,
    ///   `ResourceKitError.Code.blockingPoolShutDown`, or what `call` threw.
    public func runInterruptible<T: Sendable>(
        boundTo handle: ResourceHandle? = nil,
        deadline: ContinuousClock.Instant? = nil,
        interrupt: @escaping @Sendable () -> Void,
        _ call: @escaping @Sendable (BlockingCallInterruption) throws -> T
    ) async throws -> T {
        let driver = InterruptibleCall<T>(interrupt: interrupt)
        do {
            return try await run(boundTo: handle, deadline: deadline, onCancel: { driver.cancel($0) }) {
                try driver.runOnThisThread(call)
            }
        } catch {
            guard driver.ran else { throw error }
            // A cancel reached the running call: wait for it to return (the interrupt makes it quick).
            try? await driver.returned.wait(shielded: true)
            switch driver.outcome {
            case .success(let value)?: return value
            case .failure?, nil: throw error
            }
        }
    }

    /// A pool of one thread, for a library whose handles must stay on the thread that made them (or that is
    /// not thread-safe at all). Own it with the resource and call ``shutdown()`` from the resource's `close()`:
    /// its thread exits once the queued calls ran.
    public static func dedicatedThread(name: String) -> BlockingPool {
        BlockingPool(threadCount: 1, queueLimit: 1_024, name: name)
    }
}

/// The driver of one ``BlockingPool/runInterruptible(boundTo:deadline:interrupt:_:)`` call: its state machine
/// under a lock, the interrupt delivered under that lock, and the redelivery timer.
private final class InterruptibleCall<T: Sendable>: Sendable {
    private struct State {
        var machine = InterruptibleCallStateMachine()
        var outcome: Result<T, any Error>?
    }

    let interruption = BlockingCallInterruption()
    let returned = OneShotEvent()
    private let interrupt: @Sendable () -> Void
    private let state = Locked(State())

    init(interrupt: @escaping @Sendable () -> Void) {
        self.interrupt = interrupt
    }

    /// The call was picked up (it ran, or runs now).
    var ran: Bool {
        state.withLock { state in
            switch state.machine.state {
            case .queued, .skipped: false
            case .running, .interrupting, .returned: true
            }
        }
    }

    /// What the call returned, once it did.
    var outcome: Result<T, any Error>? { state.withLock { $0.outcome } }

    /// On the pool's thread: runs `call` unless a cancel came first. A failure after a cancel reached the call
    /// is that cancel's error.
    func runOnThisThread(_ call: (BlockingCallInterruption) throws -> T) throws -> T {
        guard state.withLock({ $0.machine.pickUp() }) == .run else { throw CancellationError() }
        let result = Result { try call(interruption) }
        let interruptedBy = state.withLock { state in
            state.outcome = result
            return state.machine.callReturned()
        }
        returned.set()
        if case .failure = result, let interruptedBy { throw interruptedBy.error }
        return try result.get()
    }

    /// A cancel request: delivers the interrupt if the call runs (under the lock: it cannot outlive the call).
    func cancel(_ reason: CancellationReason) {
        let delivered = state.withLock { state -> Bool in
            guard state.machine.cancel(reason) == .interrupt else { return false }
            interruption.request()
            interrupt()
            return true
        }
        if delivered { scheduleRedelivery(after: 1) }
    }

    private func scheduleRedelivery(after deliveries: Int) {
        let delay = InterruptibleCallStateMachine.redeliveryDelay(after: deliveries)
        DeadlineTimers.shared.schedule(at: .now + delay) { [weak self] in self?.redeliver() }
    }

    private func redeliver() {
        let deliveries = state.withLock { state -> Int? in
            guard state.machine.redeliveryDue() else { return nil }
            interrupt()
            return state.machine.deliveries
        }
        if let deliveries { scheduleRedelivery(after: deliveries) }
    }
}
