import CLibPQ
import ResourceKit

#if canImport(Glibc)
import Glibc
#endif

/// What a pool asks a connection between leases. The pool never reads the connection's state or calls libpq
/// itself: the connection answers from its own state machine (Docs/Architecture.md, "The Postgres adapter").
extension PostgresConnection {
    /// How a lessee returns the connection: an open or failed transaction is rolled back before the next use;
    /// an unknown transaction state breaks it.
    func returnedState() -> PooledConnectionState {
        state.withLock { state in
            if let conn = state.conn?.raw, !state.machine.isUnusable, !state.machine.leased {
                switch PQtransactionStatus(conn) {
                case PQTRANS_INTRANS, PQTRANS_INERROR: state.machine.requireRollback()
                case PQTRANS_UNKNOWN: state.machine.lost()
                default: break
                }
            }
            if state.machine.isUnusable || state.conn == nil { return .broken }
            if state.machine.leased { return .broken }  // a stream still holds it: its state is unknown here
            return state.machine.needsCleanup ? .needsReset : .clean
        }
    }

    /// The connection's cleanup, run now: cancels settled, the cancelled query drained, the transaction rolled
    /// back. The pool runs it on a returned connection, and a shared statement that opened a transaction block
    /// runs it before its caller is told. `false` when the connection must be discarded.
    func resetForReuse() async -> Bool {
        do {
            try await begin()
            end()
            return !isBroken
        } catch {
            return false
        }
    }

    /// A zero-timeout look at an idle connection: reads whatever the server sent while nobody asked (a
    /// termination message, end of stream) and says whether the connection is still alive and idle. Never
    /// waits.
    func isAliveWhileIdle() -> Bool {
        let alive = state.withLock { state -> Bool in
            guard let conn = state.conn?.raw, !state.machine.isUnusable, !state.machine.needsCleanup else {
                return false
            }
            // Read until nothing more is waiting: a termination message comes first, end of stream after it.
            var entry = pollfd(fd: state.socket, events: Int16(POLLIN), revents: 0)
            var looks = 0
            while poll(&entry, 1, 0) != 0, looks < 16 {
                looks += 1
                if PQconsumeInput(conn) == 0 || PQstatus(conn) == CONNECTION_BAD {
                    state.machine.lost()
                    return false
                }
                while let notification = PQnotifies(conn) { PQfreemem(notification) }
            }
            return PQstatus(conn) == CONNECTION_OK && PQtransactionStatus(conn) == PQTRANS_IDLE
        }
        notices.deliver(reportingTo: handle)
        return alive
    }
}
