import CLibPQ
import ResourceKit
import ResourceKitIO

#if canImport(Glibc)
import Glibc
#endif

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
        let send = state.withLock { state -> Bool in
            guard case .send = state.machine.cancelRequested(id, resend: resend, another: another, now: .now) else {
                return false
            }
            if state.machine.cancelsInFlight == 1 { state.cancelsSettled = OneShotEvent() }
            return true
        }
        if send { deliverCancel(id) }
    }

    /// Sends one counted cancel for `id` (the state machine already counted it in flight): the fast path when
    /// the connection's backend is verified and the channel reaches the same server, else a cancel request.
    func deliverCancel(_ id: ConnectionStateMachine.QueryID) {
        let identity = state.withLock { $0.identity }
        if let identity, let channel = cancelChannel.withLock({ $0 }) {
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
                    sendCancelRequest(id)
                }
            }
            if started { return }
        }
        sendCancelRequest(id)
    }

    /// A cancel request (`PQcancel`: a new connection carrying the BackendKeyData), sent from the blocking
    /// pool. Every pooler and balancer forwards it to where the key is valid, or to a server that ignores it.
    private func sendCancelRequest(_ id: ConnectionStateMachine.QueryID) {
        guard let key = state.withLock({ $0.cancelKey }) else {
            // No BackendKeyData (some proxies): cancellation degrades to shutting the connection down (it is
            // broken, never reused); the server notices the vanished client within its check interval and
            // stops the query (see `watchForVanishingWithoutCancelKey`). A non-blocking system call.
            state.withLock { state in
                state.machine.lost()
                if state.conn != nil, state.socket >= 0 { _ = Glibc.shutdown(state.socket, Int32(SHUT_RDWR)) }
            }
            handle?.report("postgres.cancel.unavailable")
            cancelFinished(id)
            return
        }
        statistics.record(.cancelRequest)
        handle?.report("postgres.cancel.request")
        let accepted = Self.cancelRequestPool.submit { [self] in
            var buffer = [CChar](repeating: 0, count: 256)
            _ = PQcancel(key.raw, &buffer, 256)
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
        let (settled, recheck) = state.withLock { state -> (OneShotEvent?, ContinuousClock.Instant?) in
            var settled: OneShotEvent?
            if state.machine.cancelFinished() == .cancelsSettled {
                settled = state.cancelsSettled
                state.cancelsSettled = nil
            }
            guard let basis = state.machine.resendBasis(id) else { return (settled, nil) }
            var delay = Self.resendDelay
            for _ in 0..<min(basis.resends, 8) { delay = min(delay * 2, Self.resendCeiling) }
            let at = ContinuousClock.now + delay
            return (settled, at - basis.firstAt < cancelTimeout ? at : nil)
        }
        settled?.set()
        if let recheck {
            DeadlineTimers.shared.schedule(at: recheck) { [weak self] in self?.resendIfUnanswered(id) }
        }
    }

    /// While a pool's driver sends shared statements on this connection, `gate` answers whether a cancel that did
    /// not stop the batch is still wanted (the batch's head is a statement whose caller left); without it, a resend
    /// would stop an innocent statement. `nil` when the driver lets the connection go. `gate` is called with no
    /// lock of the connection held.
    func askBeforeResending(_ gate: (@Sendable () -> Bool)?) {
        state.withLock { $0.resendGate = gate }
    }

    /// On the timers' thread: if query `id` is still on the wire and the server has sent nothing since (a
    /// cancel request that reached another server behind a balancer changes nothing), cancel it again.
    private func resendIfUnanswered(_ id: ConnectionStateMachine.QueryID) {
        // The pool's gate is asked outside this connection's lock: it takes the pool's lock, and no lock of the
        // connection is ever held while a pool's is taken.
        let gate = state.withLock { state in state.machine.resendBasis(id) != nil ? state.resendGate : nil }
        guard gate?() ?? true else { return }
        let unanswered = state.withLock { state -> Bool in
            guard state.machine.resendBasis(id) != nil, state.socket >= 0, state.conn != nil else { return false }
            var entry = pollfd(fd: state.socket, events: Int16(POLLIN), revents: 0)
            return poll(&entry, 1, 0) == 0  // else an answer is arriving: it stopped
        }
        guard unanswered else { return }
        statistics.record(.resend)
        handle?.report("postgres.cancel.resent")
        requestCancel(id, resend: true)
    }
}
