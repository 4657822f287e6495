import ResourceKit

/// The fast cancel path: one warm control connection that stops a backend with `pg_cancel_backend` instead
/// of a cancel request (which costs a new TCP connection and a server-side fork on every cancel).
///
/// Safe by construction (Docs/Architecture.md, "The Postgres adapter"):
/// - it is used only for a connection whose backend was verified at connect (``PostgresBackendIdentity``:
///   the pid libpq holds is the server's own), and only while the control connection is verified to reach
///   the *same* server (postmaster start time and system identifier). Behind a pooler or a balancer that does
///   not hold, and the cancel request (which every pooler forwards) is used instead;
/// - the statement matches the backend by pid *and* start time, so a recycled pid never matches;
/// - its result is read: `false`, no matching backend, an error, a missing privilege (`42501`) or a dead
///   control connection each report ``Delivery/notDelivered``, and the connection sends the same cancel as a
///   cancel request at once;
/// - a control connection that died is reopened lazily, with a backoff, when the channel was made with a
///   way to reconnect. A cancel for a backend on another server than the control connection's (after a
///   server restart, the new postmaster) first looks at the control connection without waiting: one the restart
///   left dead is closed, and the next cancels find a verified one again.
///
/// One cancel at a time goes through the control connection; a cancel that finds it busy uses a cancel
/// request. Work the channel starts (the cancel statement, a reconnect) is owned by it and awaited by
/// ``close()``.
public final class PostgresCancelChannel: Sendable {
    /// What became of one cancel given to the channel.
    public enum Delivery: Sendable, Hashable {
        /// `pg_cancel_backend` returned `true` for the verified backend.
        case delivered
        /// Not delivered: send a cancel request.
        case notDelivered
    }

    private typealias Machine = CancelChannelStateMachine<PostgresConnection, PostgresServerIdentity>

    private static let statement = """
        SELECT pg_cancel_backend(a.pid) FROM pg_stat_get_activity($1) AS a \
        WHERE (extract(epoch FROM a.backend_start) * 1000000)::int8 = $2
        """

    /// The channel's decisions (``CancelChannelStateMachine``), made under this lock and acted on after it.
    private let state: Locked<Machine>

    /// The control connection's sockets, if it is open.
    var controlDescriptors: [Int32] { state.withLock { $0.control }?.ownedDescriptors ?? [] }
    private let work = OwnedTasks()
    private let reconnect: (@Sendable () async throws -> PostgresConnection)?

    /// Creates a channel over `control`, a connection used for nothing else, which the channel closes in
    /// ``close()``. A control connection that dies is not replaced (there is no way to reconnect).
    public init(control: PostgresConnection) {
        reconnect = nil
        // Unverified (behind a pooler), it is of no use to a cancel, but the channel still owns it and closes it.
        state = Locked(Machine(control: (control, control.backendIdentity?.server), canReconnect: false, now: .now))
    }

    /// Creates a channel that opens its control connection with `connect` on first need, and again (with a
    /// backoff from 100 ms up to 5 s) whenever it died.
    public init(connect: @escaping @Sendable () async throws -> PostgresConnection) {
        reconnect = connect
        state = Locked(Machine(control: nil, canReconnect: true, now: .now))
    }

    /// The control connection's verified backend, if it has one now.
    public var controlBackend: PostgresBackendIdentity? { state.withLock { $0.control?.backendIdentity } }

    /// The server the control connection is verified to reach, if any.
    public var server: PostgresServerIdentity? { state.withLock { $0.server } }

    /// Starts cancelling `backend` on the control connection; `completion` runs once with the outcome, on a
    /// task the channel owns. Returns `false` (and never calls `completion`) when the channel cannot try now:
    /// no verified control connection on the backend's server, busy, disabled, or closed. Non-blocking: safe
    /// from `onCancel`.
    public func tryCancel(_ backend: PostgresBackendIdentity, completion: @escaping @Sendable (Delivery) -> Void)
        -> Bool
    {
        // A control connection verified on another server than the backend's may be one the server's restart
        // left dead (its socket closed under it): look without waiting, which marks it broken if so, so that it
        // is dropped and a verified one opened below rather than kept forever.
        if let other = state.withLock({ $0.controlToLookAt(before: backend.server) }) {
            _ = other.isAliveWhileIdle()
        }
        let action = state.withLock { $0.tryCancel(on: backend.server, isBroken: \.isBroken, now: .now) }
        switch action {
        case .cannot(let dead, let reconnect):
            if dead != nil || reconnect {
                work.start {
                    await dead?.handle?.close()
                    if reconnect { await self.reconnectControl() }
                }
            }
            return false
        case .start(let control):
            work.start {
                let outcome = await self.cancel(backend, on: control)
                completion(outcome)
            }
            return true
        }
    }

    private func cancel(_ backend: PostgresBackendIdentity, on control: PostgresConnection) async -> Delivery {
        var outcome = Delivery.notDelivered
        var refused = false
        do {
            let rows = try await control.executeInternally(Self.statement, [backend.pid, backend.backendStart]).rows
            if try rows.first?.decode(Bool?.self, at: 0) == true { outcome = .delivered }
        } catch let error as PostgresError where error.sqlState == "42501" {
            refused = true  // no privilege: every cancel uses cancel requests
        } catch {
            // A dead control connection is dropped by the next cancel and reopened.
        }
        state.withLock { $0.cancelEnded(disable: refused) }
        return outcome
    }

    private func reconnectControl() async {
        var made: PostgresConnection?
        do {
            made = try await reconnect?()
        } catch {
            made = nil
        }
        let toClose = state.withLock { machine in
            machine.reconnectEnded(made.map { ($0, $0.backendIdentity?.server) }, now: .now)
        }
        for connection in toClose { await connection.handle?.close() }
    }

    /// Opens the control connection now if there is none and the channel can reconnect (a pool calls it when
    /// it opens a connection, so that the first cancel already finds the fast path). Returns when the attempt
    /// ended; does nothing while another attempt is under way.
    public func connectIfNeeded() async {
        if state.withLock({ $0.connectIfNeeded(isBroken: \.isBroken, now: .now) }) { await reconnectControl() }
    }

    /// Closes the control connection after the work in progress ended (a reconnect that ends meanwhile closes
    /// what it made).
    public func close() async {
        let control = state.withLock { $0.close() }
        await work.waitForAll()
        await control?.handle?.close()
    }
}
