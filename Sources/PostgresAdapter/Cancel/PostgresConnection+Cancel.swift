import CLibPQ
import ResourceKit
public import ResourceKitIO

/// How a connection's cancels travel: the state machine decides (under the lock) whether a cancel may go out
/// for a query; the path is chosen and the work started after the lock is released.
extension PostgresConnection {
    /// The first resend of a cancel request that did not stop its query waits this long; each next one twice
    /// as long, up to ``resendCeiling``, while the query is on the wire and within ``cancelTimeout``.
    static let resendDelay: Duration = .milliseconds(50)
    static let resendCeiling: Duration = .milliseconds(800)

    /// The threads that send cancel requests (`PQcancel` blocks until the server answers). Kept apart from
    /// the shared blocking pool, so that a cancel never queues behind slow work there (a host-name lookup
    /// against a broken resolver, a large file read).
    static let cancelRequestPool = BlockingPool(threadCount: 4, queueLimit: 65_536, name: "rk.pg-cancel")

    /// Sends a cancel for query `id` if (and only if) it is still on the wire and none is in flight for it
    /// (`another`: even then, for a later statement of a shared batch). Non-blocking; safe from `onCancel` and
    /// from the reactor thread.
    func requestCancel(_ id: ConnectionStateMachine.QueryID, resend: Bool = false, another: Bool = false) {
        let action = state.withLock { $0.machine.cancelRequested(id, resend: resend, another: another, now: .now) }
        if case .send(_, let route) = action { deliverCancel(id, route) }
    }

    /// Sends one counted cancel for `id` (the state machine already counted it in flight) the way the machine
    /// chose: the fast path when the backend is verified and the channel reaches its server now, else a cancel
    /// request; without a key, the connection's shutdown. The one sender of a query's stop: every trigger (a
    /// cancellation hook, a caller that left, a resend, a shared batch's later statement, the close) reaches the
    /// server through here, and only after the machine said so.
    func deliverCancel(_ id: ConnectionStateMachine.QueryID, _ route: StopRoute) {
        switch route {
        case .shutDown:
            shutDownForStop(id)
        case .cancelRequest(let key):
            sendCancelRequest(id, key)
        case .fastPath(let identity, let key):
            guard let channel = cancelChannel.withLock({ $0 }) else { return sendCancelRequest(id, key) }
            let started = channel.tryCancel(identity) { [self] outcome in
                switch outcome {
                case .delivered:
                    statistics.record(.fastPath)
                    handle?.report("postgres.cancel.fastPath")
                    cancelFinished(id)
                case .notDelivered:
                    // `false`, no such backend, an error, no privilege, a dead control connection: this same
                    // cancel goes out as a cancel request, now.
                    statistics.record(.fastPathFellBack)
                    handle?.report("postgres.cancel.fastPathFellBack")
                    sendCancelRequest(id, key)
                }
            }
            if !started { sendCancelRequest(id, key) }
        }
    }

    /// No BackendKeyData (some proxies): the stop is the connection's shutdown (the machine already marked it
    /// broken, never reused); the server notices the vanished client within its check interval and stops the
    /// query (see `watchForVanishingWithoutCancelKey`). A non-blocking system call.
    private func shutDownForStop(_ id: ConnectionStateMachine.QueryID) {
        state.withLock { state in
            state.conn?.shutDown()
        }
        handle?.report("postgres.cancel.unavailable")
        cancelFinished(id)
    }

    /// A cancel request (`PQcancel`: a new connection carrying the BackendKeyData), sent from the blocking
    /// pool. Every pooler and balancer forwards it to where the key is valid, or to a server that ignores it.
    private func sendCancelRequest(_ id: ConnectionStateMachine.QueryID, _ key: PGCancelPointer) {
        statistics.record(.cancelRequest)
        handle?.report("postgres.cancel.request")
        let accepted = Self.cancelRequestPool.submit { [self] in
            key.sendRequest()
            cancelFinished(id)
        }
        if !accepted {
            state.withLock { $0.machine.lost() }
            cancelFinished(id)
        }
    }

    /// A cancel for `id` finished (its socket reached EOF, or the control statement returned). Wakes the
    /// cleanup waiting for it, and schedules a check: a query still unanswered gets the cancel again.
    private func cancelFinished(_ id: ConnectionStateMachine.QueryID) {
        let (finished, recheck) = state.withLock {
            state -> (ConnectionStateMachine.CancelFinishedAction, ContinuousClock.Instant?) in
            let finished = state.machine.cancelFinished()
            guard let basis = state.machine.resendBasis(id) else { return (finished, nil) }
            var delay = Self.resendDelay
            for _ in 0..<min(basis.resends, 8) { delay = min(delay * 2, Self.resendCeiling) }
            let at = ContinuousClock.now + delay
            return (finished, at - basis.firstAt < cancelTimeout ? at : nil)
        }
        if case .cancelsSettled(let settlement) = finished { settlement.event.set() }
        if let recheck {
            DeadlineTimers.shared.schedule(at: recheck) { [weak self] in self?.resendIfUnanswered(id) }
        }
    }

    /// While a pool's driver sends shared statements on this connection, `gate` answers whether a cancel that did
    /// not stop the batch is still wanted (the batch's head is a statement whose caller left); without it, a resend
    /// would stop an innocent statement. `nil` when the driver lets the connection go. `gate` is called with no
    /// lock of the connection held.
    func askBeforeResending(_ gate: (@Sendable () -> Bool)?) {
        let consent = gate.map(ResendConsent.init)
        state.withLock { $0.machine.resendConsentChanged(consent) }
    }

    /// On the timers' thread: if query `id` is still on the wire and the server has sent nothing since (a
    /// cancel request that reached another server behind a balancer changes nothing), cancel it again.
    private func resendIfUnanswered(_ id: ConnectionStateMachine.QueryID) {
        // The pool's consent is asked outside this connection's lock, which it need not hold: it takes the pool's
        // lock. The order is a connection's lock, then the pool's (a driver's claim), never the other way round:
        // nothing under the pool's lock calls a connection.
        guard let basis = state.withLock({ $0.machine.resendBasis(id) }), basis.consent?.stillWanted() ?? true else {
            return
        }
        let unanswered = state.withLock { state -> Bool in
            guard state.machine.resendBasis(id) != nil, let conn = state.conn, conn.socket >= 0 else { return false }
            return !conn.hasInputWaiting  // else an answer is arriving: it stopped
        }
        guard unanswered else { return }
        statistics.record(.resend)
        handle?.report("postgres.cancel.resent")
        requestCancel(id, resend: true)
    }
}

/// A pool driver's answer to "is a cancel that did not stop the batch still wanted?" (the batch's head is a
/// statement whose caller left), held by the connection's machine while the driver sends on it. Compared by
/// identity: the machine is a value, and two consents are the same only when they are the same driver's.
final class ResendConsent: Sendable, Equatable {
    /// Asked with no lock of the connection held (it takes the pool's).
    let stillWanted: @Sendable () -> Bool

    init(_ stillWanted: @escaping @Sendable () -> Bool) {
        self.stillWanted = stillWanted
    }

    static func == (lhs: ResendConsent, rhs: ResendConsent) -> Bool { lhs === rhs }
}

/// `PostgresCancelChannel`, the fast cancel path: one warm control connection that stops a backend with
/// `pg_cancel_backend` instead of a cancel request (which costs a new TCP connection and a server-side fork on
/// every cancel).
///
/// Safe by construction (Docs/Architecture.md, "The Postgres adapter"):
/// - it is used only for a connection whose backend was verified at connect (``PostgresBackendIdentity``:
///   the pid libpq holds is the server's own), and only while the control connection is verified to reach
///   the *same* server (postmaster start time and system identifier). Behind a pooler or a balancer that does
///   not hold, and the cancel request (which every pooler forwards) is used instead;
/// - the statement matches the backend by pid *and* start time, so a recycled pid never matches;
/// - its result is read: `false`, no matching backend, an error, a missing privilege (`42501`) or a dead
///   control connection each report ``PostgresCancelDelivery/notDelivered``, and the connection sends the same
///   cancel as a cancel request at once;
/// - a control connection that died is reopened lazily, with a backoff, when the channel was made with a
///   way to reconnect. A cancel for a backend on another server than the control connection's (after a
///   server restart, the new postmaster) first looks at the control connection without waiting: one the restart
///   left dead is closed, and the next cancels find a verified one again.
///
/// One cancel at a time goes through the control connection; a cancel that finds it busy uses a cancel
/// request. The connection's life (opened lazily, reopened with a backoff, one stop at a time, disabled when
/// refused) is ResourceKitIO's `ControlChannel`, the same block the adapters for other servers use; the statement
/// and the verification are the extension's below. Work the channel starts (the cancel statement, a reconnect) is
/// owned by it and awaited by `close()`.
public typealias PostgresCancelChannel = ControlChannel<PostgresConnection, PostgresServerIdentity>

/// What became of one cancel given to a ``PostgresCancelChannel``.
public enum PostgresCancelDelivery: Sendable, Hashable {
    /// `pg_cancel_backend` returned `true` for the verified backend.
    case delivered
    /// Not delivered: send a cancel request.
    case notDelivered
}

private let cancelStatement = """
    SELECT pg_cancel_backend(a.pid) FROM pg_stat_get_activity($1) AS a \
    WHERE (extract(epoch FROM a.backend_start) * 1000000)::int8 = $2
    """

private let closeControl: @Sendable (PostgresConnection) async -> Void = { await $0.handle?.close() }

extension ControlChannel where Connection == PostgresConnection, Server == PostgresServerIdentity {
    /// What became of one cancel given to the channel.
    public typealias Delivery = PostgresCancelDelivery

    /// The control connection's sockets, if it is open.
    var controlDescriptors: [Int32] { current?.ownedDescriptors ?? [] }

    /// Creates a channel over `control`, a connection used for nothing else, which the channel closes in
    /// ``close()``. A control connection that dies is not replaced (there is no way to reconnect).
    public convenience init(control: PostgresConnection) {
        // Unverified (behind a pooler), it is of no use to a cancel, but the channel still owns it and closes it.
        self.init(control: control, server: control.backendIdentity?.server, close: closeControl, isBroken: \.isBroken)
    }

    /// Creates a channel that opens its control connection with `connect` on first need, and again (with a
    /// backoff from 100 ms up to 5 s) whenever it died.
    public convenience init(connect: @escaping @Sendable () async throws -> PostgresConnection) {
        self.init(
            connect: {
                let made = try await connect()
                return (made, made.backendIdentity?.server)
            },
            close: closeControl, isBroken: \.isBroken)
    }

    /// The control connection's verified backend, if it has one now.
    public var controlBackend: PostgresBackendIdentity? { current?.backendIdentity }

    /// Starts cancelling `backend` on the control connection; `completion` runs once with the outcome, on a
    /// task the channel owns. Returns `false` (and never calls `completion`) when the channel cannot try now:
    /// no verified control connection on the backend's server, busy, disabled, or closed. Non-blocking: safe
    /// from `onCancel`.
    public func tryCancel(_ backend: PostgresBackendIdentity, completion: @escaping @Sendable (Delivery) -> Void)
        -> Bool
    {
        // A control connection verified on another server than the backend's may be one the server's restart
        // left dead (its socket closed under it): look without waiting, which marks it broken if so, so that it
        // is dropped and a verified one opened rather than kept forever.
        if let other = connectionToLookAt(before: backend.server) {
            _ = other.isAliveWhileIdle()
        }
        return tryStart(on: backend.server) { control in
            var outcome = Delivery.notDelivered
            var refused = false
            do {
                let rows = try await control.executeInternally(cancelStatement, [backend.pid, backend.backendStart])
                    .rows
                if try rows.first?.decode(Bool?.self, at: 0) == true { outcome = .delivered }
            } catch let error as PostgresError where error.sqlState == "42501" {
                refused = true  // no privilege: every cancel uses cancel requests
            } catch {
                // A dead control connection is dropped by the next cancel and reopened.
            }
            completion(outcome)
            return refused ? .refused : .ran
        }
    }
}
