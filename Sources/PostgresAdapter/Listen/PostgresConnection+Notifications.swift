import CLibPQ
import ResourceKit

/// What a listener asks its connection: the listener never reads the connection's state or calls libpq.
extension PostgresConnection {
    /// Reads what arrived, without waiting, under the connection's lock: the notifications, the socket to wait
    /// on next, and the error that ended the connection, if one did (the connection is then broken).
    func readNotifications() -> ([PostgresNotification], Int32, PostgresError?) {
        let result = state.withLock { state -> ([PostgresNotification], Int32, PostgresError?) in
            guard let conn = state.conn else {
                return ([], -1, PostgresError(.connection, "the connection was closed"))
            }
            var notifications: [PostgresNotification] = []
            let alive = conn.consumeInput() == 1
            while let notify = conn.notifies() {
                notifications.append(
                    PostgresNotification(
                        channel: String(cString: notify.pointee.relname),
                        payload: String(cString: notify.pointee.extra),
                        senderPID: notify.pointee.be_pid
                    ))
                PQfreemem(notify)
            }
            if !alive {
                state.machine.lost()
                let message = conn.errorText
                return (
                    notifications, conn.socket,
                    PostgresError(.connection, message.isEmpty ? "the connection was lost" : message)
                )
            }
            return (notifications, conn.socket, nil)
        }
        notices.deliver(reportingTo: handle)
        return result
    }

    /// Shuts the socket down (non-blocking) so that the server ends the session and a reader waiting on it
    /// wakes; the connection is closed later by its owner.
    func shutDownSocket() {
        state.withLock { state in
            state.conn?.shutDown()
        }
    }
}
