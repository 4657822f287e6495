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
        var health = TimersHealth()
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

    /// How late timers fired and how long one action held the thread, since the process started (for tests: a
    /// deadline test that fails reports it, so that a stalled machine is told apart from a lost cancel).
    package var health: TimersHealth { state.withLock { $0.health } }

    private func loop() {
        while true {
            let (due, late) = state.waitWithLock {
                state -> LockedWaitStep<([@Sendable () -> Void], Duration)> in
                let now = ContinuousClock.now
                let earliest = state.timers.nextDeadline()
                let due = state.timers.popExpired(now: now)
                if !due.isEmpty { return .done((due, earliest.map { now - $0 } ?? .zero)) }
                return .sleep(until: earliest)
            }
            var longest = Duration.zero
            for action in due {
                let started = ContinuousClock.now
                action()
                longest = max(longest, ContinuousClock.now - started)
            }
            state.withLock { $0.health.record(lateness: late, longestAction: longest) }
        }
    }
}

/// The timers' thread's record: the latest a batch of timers fired after its instant, and the longest one action
/// ran (an action that blocks delays every timer after it).
package struct TimersHealth: Sendable, CustomStringConvertible {
    package private(set) var worstLateness: Duration = .zero
    package private(set) var longestAction: Duration = .zero

    mutating func record(lateness: Duration, longestAction action: Duration) {
        worstLateness = max(worstLateness, lateness)
        longestAction = max(longestAction, action)
    }

    package var description: String {
        "timers fired at worst \(worstLateness) late; the longest action ran \(longestAction)"
    }
}
