/// When a server's accept loop tries again after the process (or the system) ran out of descriptors or memory, as a
/// value: events in, decisions out, no clock read and no I/O (tested without either, `AcceptBackoffTests`).
///
/// The delays are Go's `http.Server`: 5 ms after the first failure, doubling up to 1 s. A pause is one episode: it
/// begins at the first failure and ends at the first accept that succeeds, and each end is reported once (one
/// ``SocketServer/Event/acceptPaused(_:)`` and one ``SocketServer/Event/acceptResumed(failures:pausedFor:)``), not
/// once per failed attempt (Docs/Architecture.md, "Serving").
struct AcceptBackoff: Sendable, Equatable {
    static let firstDelay: Duration = .milliseconds(5)
    static let longestDelay: Duration = .seconds(1)

    /// The delay before the next attempt while paused; `nil` while accepting normally.
    private(set) var delay: Duration?
    /// Failed attempts in this pause.
    private(set) var failures = 0
    private var pausedAt: ContinuousClock.Instant?

    init() {}

    var isPaused: Bool { delay != nil }

    /// What a failure decided: wait `delay` (or until descriptors are freed), and report `event` when it is the
    /// first of a pause.
    struct Failure: Sendable, Equatable {
        let delay: Duration
        let event: SocketServer.Event?
    }

    /// An attempt failed with `error` at `now`: the pause begins (reported), or goes on with a doubled delay.
    mutating func failed(_ error: SocketError, at now: ContinuousClock.Instant) -> Failure {
        failures += 1
        guard let current = delay else {
            delay = Self.firstDelay
            pausedAt = now
            return Failure(delay: Self.firstDelay, event: .acceptPaused(error))
        }
        let next = min(current * 2, Self.longestDelay)
        delay = next
        return Failure(delay: next, event: nil)
    }

    /// An accept succeeded at `now`: a pause ends (reported, with its count and length); else nothing.
    mutating func accepted(at now: ContinuousClock.Instant) -> SocketServer.Event? {
        guard delay != nil else { return nil }
        let event = SocketServer.Event.acceptResumed(failures: failures, pausedFor: now - (pausedAt ?? now))
        self = AcceptBackoff()
        return event
    }
}
