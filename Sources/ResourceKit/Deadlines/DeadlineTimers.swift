import Foundation

/// The deadlines' clock: one dedicated thread (`rk.timers`) that runs each scheduled action at its instant.
///
/// Every deadline in ResourceKit fires from here: a scope's, an operation's, a wait's
/// (Docs/Architecture.md, "Threads and pools"). It lives in the core, apart from the I/O reactor, so that the
/// lifecycle layer needs no I/O runtime, and a deadline fires even when the reactor cannot start (descriptor
/// exhaustion). The thread parks on a condition variable against `CLOCK_MONOTONIC` (nanosecond resolution) and
/// is woken only when a new timer becomes the earliest.
///
/// Actions must be short and must not block (adapters' own timers included): they run one after another on the
/// timers' thread. ResourceKit's call `cancel` on a cell, a scope or an operation, which decides under a lock
/// and resumes a continuation.
public final class DeadlineTimers: Sendable {
    /// The process-wide timers, started on first use. Never shut down.
    public static let shared = DeadlineTimers(name: "rk.timers")

    private struct State: Sendable {
        var timers = TimerHeap<@Sendable () -> Void>()
    }

    private let state = Locked(State(), withCondition: true)

    private init(name: String) {
        DedicatedThread.start(name: name) { [self] in self.loop() }
    }

    /// Runs `action` on the timers' thread at `instant` (or just after it). For an adapter's own timed step
    /// (escalating a stop after a grace period); a wait's deadline needs no timer of yours (pass `deadline:`).
    @discardableResult
    public func schedule(at instant: ContinuousClock.Instant, _ action: @escaping @Sendable () -> Void)
        -> DeadlineTimerID
    {
        state.withLockSignalling { state in
            // The thread needs waking only when this timer becomes the earliest; otherwise it wakes in time.
            let earliest = state.timers.nextDeadline()
            let id = state.timers.schedule(at: instant, action)
            return (id, earliest.map { instant < $0 } ?? true)
        }
    }

    /// Cancels a timer; a no-op if it already fired.
    public func cancel(_ id: DeadlineTimerID) {
        _ = state.withLock { $0.timers.cancel(id) }
    }

    /// Number of timers still scheduled (for tests: cancelled timers must not pile up).
    package var scheduledCount: Int { state.withLock { $0.timers.count } }

    private func loop() {
        while true {
            let due = state.waitWithLock { state -> LockedWaitStep<[@Sendable () -> Void]> in
                let due = state.timers.popExpired(now: .now)
                if !due.isEmpty { return .done(due) }
                return .sleep(until: state.timers.nextDeadline())
            }
            for action in due {
                action()
            }
        }
    }
}
