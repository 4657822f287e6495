/// When a server's accept loop tries again after the process (or the system) ran out of descriptors or memory, as a
/// value: events in, decisions out, no clock read and no I/O (tested without either, `AcceptBackoffTests`).
///
/// The delays are Go's `http.Server`: 5 ms after the first failure, doubling up to 1 s. A pause is one episode: it
/// begins at the first failure and ends at the first accept that succeeds, and each end is reported once (one
/// ``SocketServer/Event/acceptPaused(_:)`` and one ``SocketServer/Event/acceptResumed(failures:pausedFor:)``), not
/// once per failed attempt (Docs/Architecture.md, "Serving").
///
/// With hysteresis: while a crowd drains at the edge of the descriptor limit, accepts succeed and fail by turns
/// (each freed descriptor is taken by the next client at once). A pause that begins within ``settle`` of the last
/// reported resume is not reported unless it lasts ``settle`` (then it is, once, dated from its beginning); its end
/// is reported only if its beginning was. An operator sees one pair per real episode, and a server that stays out of
/// descriptors is never shown as accepting for longer than ``settle``.
struct AcceptBackoff: Sendable, Equatable {
    static let firstDelay: Duration = .milliseconds(5)
    static let longestDelay: Duration = .seconds(1)
    /// How long after a resume a new pause stays unreported, and how long such a pause must last to be reported.
    static let settle: Duration = .seconds(1)

    /// The delay before the next attempt while paused; `nil` while accepting normally.
    private(set) var delay: Duration?
    /// Failed attempts in this pause.
    private(set) var failures = 0
    private var pausedAt: ContinuousClock.Instant?
    /// Whether this pause's beginning was reported.
    private(set) var reported = false
    /// When the last reported pause ended.
    private var resumedAt: ContinuousClock.Instant?

    init() {}

    var isPaused: Bool { delay != nil }

    /// What a failure decided: wait `delay` (or until descriptors are freed), and report `event` when the pause
    /// becomes known.
    struct Failure: Sendable, Equatable {
        let delay: Duration
        let event: SocketServer.Event?
    }

    /// An attempt failed with `error` at `now`: a pause begins (reported unless it follows a resume by less than
    /// ``settle``), or goes on with a doubled delay (reported once it has lasted ``settle``).
    mutating func failed(_ error: SocketError, at now: ContinuousClock.Instant) -> Failure {
        failures += 1
        guard let current = delay, let began = pausedAt else {
            delay = Self.firstDelay
            pausedAt = now
            reported = resumedAt.map { now - $0 >= Self.settle } ?? true
            return Failure(delay: Self.firstDelay, event: reported ? .acceptPaused(error) : nil)
        }
        let next = min(current * 2, Self.longestDelay)
        delay = next
        if !reported, now - began >= Self.settle {
            reported = true
            return Failure(delay: next, event: .acceptPaused(error))
        }
        return Failure(delay: next, event: nil)
    }

    /// An accept succeeded at `now`: a reported pause ends (reported, with its count and length); an unreported one
    /// ends silently; else nothing.
    mutating func accepted(at now: ContinuousClock.Instant) -> SocketServer.Event? {
        guard delay != nil else { return nil }
        let event =
            reported ? SocketServer.Event.acceptResumed(failures: failures, pausedFor: now - (pausedAt ?? now)) : nil
        let lastResume = reported ? now : resumedAt
        self = AcceptBackoff()
        resumedAt = lastResume
        return event
    }
}
