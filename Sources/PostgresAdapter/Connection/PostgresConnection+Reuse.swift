import CLibPQ
import ResourceKit

/// What a pool asks a connection between leases. The pool never reads the connection's state or calls libpq
/// itself: the connection answers from its own state machine (Docs/Architecture.md, "The Postgres adapter").
extension PostgresConnection {
    /// How a lessee returns the connection: an open or failed transaction is rolled back before the next use;
    /// an unknown transaction state breaks it. `resettingSession`: a session its lessee used owes the pool's
    /// session reset, which the next operation carries in front of its statement (Docs/Architecture.md, "Clean
    /// sessions"); a connection whose only debt is that reset is handed out as clean.
    func returnedState(resettingSession: Bool) -> PooledConnectionState {
        state.withLock { state in
            if let conn = state.conn, !state.machine.isUnusable, !state.machine.leased {
                switch conn.transactionStatus() {
                case PQTRANS_INTRANS, PQTRANS_INERROR: state.machine.requireRollback()
                case PQTRANS_UNKNOWN: state.machine.lost()
                default: break
                }
            }
            if state.machine.isUnusable || state.conn == nil { return .broken }
            if state.machine.leased { return .broken }  // a stream still holds it: its state is unknown here
            if resettingSession, !state.machine.sessionFresh { state.machine.requireSessionReset() }
            if !state.machine.needsCleanup || state.machine.onlySessionResetOwed { return .clean }
            return .needsReset  // cleaned in the background, the session last (``ConnectionStateMachine``)
        }
    }

    /// The connection's cleanup, run now and on its own (the machine's ``ConnectionStateMachine/Holder/cleanup``):
    /// cancels settled, the cancelled query drained, the transaction rolled back, the session reset. The pool runs
    /// it on a returned connection, and a shared statement that opened a transaction block runs it before its
    /// caller is told. `false` when the connection must be discarded.
    func resetForReuse() async -> Bool {
        switch state.withLock({ $0.machine.beginCleanup() }) {
        case .refuseUnusable, .refuseBusy:
            return false
        case .nothingOwed:
            return !isBroken
        case .cleanUp:
            defer { end() }
            do {
                try await cleanUp()
            } catch {
                return false
            }
            return !isBroken
        }
    }

    /// A zero-timeout look at an idle connection: reads whatever the server sent while nobody asked (a
    /// termination message, end of stream) and says whether the connection is still alive and idle (a session
    /// reset it owes is no obstacle: the next operation carries it). Never waits.
    func isAliveWhileIdle() -> Bool {
        let alive = state.withLock { state -> Bool in
            guard let conn = state.conn, !state.machine.isUnusable,
                !state.machine.needsCleanup || state.machine.onlySessionResetOwed
            else {
                return false
            }
            // Read until nothing more is waiting: a termination message comes first, end of stream after it.
            var looks = 0
            while conn.hasInputWaiting, looks < 16 {
                looks += 1
                if conn.consumeInput() == 0 || conn.status() == CONNECTION_BAD {
                    state.machine.lost()
                    return false
                }
                while let notification = conn.notifies() { PQfreemem(notification) }
            }
            return conn.status() == CONNECTION_OK && conn.transactionStatus() == PQTRANS_IDLE
        }
        notices.deliver(reportingTo: handle)
        return alive
    }
}
