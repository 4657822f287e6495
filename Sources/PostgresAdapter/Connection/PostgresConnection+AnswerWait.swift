import ResourceKit
import ResourceKitIO
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Waiting for the server's answer: park on the reactor, or first look again for a moment when that pays.
extension PostgresConnection {
    /// Waits until `socket` is readable. The first time for a query (`lookedAgain` false), when no other query of
    /// this process is in flight or about to be (``CooperativeLoad/othersAreBusy``), it looks again for up to
    /// ``answerSpin`` first: a local server usually answers a lone short query within it, and parking on the
    /// reactor costs two thread wake-ups. Under load it parks at once: with other queries in flight, a look would
    /// hold a cooperative thread that their results need, and burn CPU that the server needs (the bench's 64-task
    /// row). Only a caller's own operation looks again; a drain parks at once, and so does a caller on an actor
    /// (the look would hold the actor) and a task running on the reactor's own thread (it prefers the reactor as
    /// its executor), where a look would hold back every other readiness event.
    ///
    /// Cancellation: the wait is bound to the connection's handle (and the caller's operation); a look in
    /// progress stops at the task's or the handle's cancellation and parks, which then returns at once.
    ///
    /// `afterCancel` runs when a cancel wins while the wait is parked, on the canceller's thread right after the
    /// wait resumed (``IOReactor``'s `afterCancel`): a query that runs without an operation of its own cancels
    /// itself on the server there.
    func waitForAnswer(
        _ socket: Int32,
        lookedAgain: inout Bool,
        bindToCaller: Bool = true,
        deadline: ContinuousClock.Instant? = nil,
        afterCancel: (@Sendable (CancellationReason) -> Void)? = nil
    ) async throws {
        let handle = self.handle
        let first = !lookedAgain
        lookedAgain = true
        // `#isolation`: the caller's actor, as this function runs on it (Docs/Architecture.md, "Where code runs").
        // Bound first: `#isolation != nil` written inline crashes Swift 6.3.1's code generation here.
        let callersActor: (any Actor)? = #isolation
        let look = Self.looksAgain(
            firstWait: first, callersOwn: bindToCaller, onActor: callersActor != nil,
            onReactorThread: reactor.isCurrentThread, othersAreBusy: CooperativeLoad.postgres.othersAreBusy)
        if look { answerLooks.add(1, ordering: .relaxed) }
        if look,
            Self.becomesReadable(
                socket, within: Self.answerSpin, unless: { Task.isCancelled || handle?.isCancelled == true })
        {
            return
        }
        try await reactor.wait(
            for: socket, .readable, boundTo: bindToCaller ? handle : nil, deadline: deadline, afterCancel: afterCancel)
    }

    /// Whether a wait looks at the socket before parking: only a caller's own first wait for a query, never on an
    /// actor (the query runs on its caller's actor, which a look would hold: the main actor for up to
    /// ``answerSpin``), never on the reactor's thread (a look there would hold back every readiness event of the
    /// process), and only when no other query is in flight or about to be.
    static func looksAgain(
        firstWait: Bool, callersOwn: Bool, onActor: Bool, onReactorThread: Bool, othersAreBusy: Bool
    ) -> Bool {
        firstWait && callersOwn && !onActor && !onReactorThread && !othersAreBusy
    }

    /// How long a lone query's first wait for its answer polls the socket before parking on the reactor. The
    /// figures, with and without it, are in the measurement log (Benchmarks/History.md).
    static let answerSpin: Duration = .microseconds(100)

    /// Polls `socket` without blocking (yielding the CPU between looks) until it is readable, `limit` passed,
    /// or `stop()` holds (a cancellation: the caller then parks and is resumed at once). Never blocks: each
    /// look is `poll` with a zero timeout.
    static func becomesReadable(_ socket: Int32, within limit: Duration, unless stop: () -> Bool) -> Bool {
        let deadline = ContinuousClock.now + limit
        var entry = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        repeat {
            if poll(&entry, 1, 0) > 0 { return true }
            if stop() { return false }
            sched_yield()
        } while ContinuousClock.now < deadline
        return false
    }
}
