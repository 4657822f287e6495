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

    private struct State: Sendable {
        var control: PostgresConnection?
        var server: PostgresServerIdentity?
        var busy = false
        var disabled = false
        var closed = false
        var reconnecting = false
        var nextReconnect: ContinuousClock.Instant = .now
        var backoff: Duration = .milliseconds(100)
    }

    private static let statement = """
        SELECT pg_cancel_backend(a.pid) FROM pg_stat_get_activity($1) AS a \
        WHERE (extract(epoch FROM a.backend_start) * 1000000)::int8 = $2
        """

    private let state = Locked(State())

    /// The control connection's sockets, if it is open.
    var controlDescriptors: [Int32] { state.withLock { $0.control }?.ownedDescriptors ?? [] }
    private let work = OwnedTasks()
    private let reconnect: (@Sendable () async throws -> PostgresConnection)?

    /// Creates a channel over `control`, a connection used for nothing else, which the channel closes in
    /// ``close()``. A control connection that dies is not replaced (there is no way to reconnect).
    public init(control: PostgresConnection) {
        reconnect = nil
        state.withLock { state in
            state.control = control
            state.server = control.backendIdentity?.server
        }
    }

    /// Creates a channel that opens its control connection with `connect` on first need, and again (with a
    /// backoff from 100 ms up to 5 s) whenever it died.
    public init(connect: @escaping @Sendable () async throws -> PostgresConnection) {
        reconnect = connect
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
        enum Decision {
            case start(PostgresConnection)
            case cannot(dead: PostgresConnection?, reconnect: Bool)
        }
        // A control connection verified on another server than the backend's may be one the server's restart
        // left dead (its socket closed under it): look without waiting, which marks it broken if so, so that it
        // is dropped and a verified one opened below rather than kept forever.
        let other = state.withLock { state in
            state.busy || state.server == backend.server ? nil : state.control
        }
        if let other { _ = other.isAliveWhileIdle() }
        let decision = state.withLock { state -> Decision in
            guard !state.closed, !state.disabled else { return .cannot(dead: nil, reconnect: false) }
            if let control = state.control, !control.isBroken {
                guard !state.busy, state.server == backend.server else { return .cannot(dead: nil, reconnect: false) }
                state.busy = true
                return .start(control)
            }
            // No live control connection: drop a dead one (closed below) and reconnect if it is time.
            let dead = state.control
            state.control = nil
            state.server = nil
            let reconnect = reconnect != nil && !state.reconnecting && ContinuousClock.now >= state.nextReconnect
            if reconnect { state.reconnecting = true }
            return .cannot(dead: dead, reconnect: reconnect)
        }
        switch decision {
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
        do {
            let rows = try await control.query(Self.statement, [backend.pid, backend.backendStart])
            if try rows.first?.decode(Bool?.self, at: 0) == true { outcome = .delivered }
        } catch let error as PostgresError where error.sqlState == "42501" {
            state.withLock { $0.disabled = true }  // no privilege: every cancel uses cancel requests
        } catch {
            // A dead control connection is dropped here and reopened on a later cancel.
        }
        state.withLock { $0.busy = false }
        return outcome
    }

    private func reconnectControl() async {
        var made: PostgresConnection?
        do {
            made = try await reconnect?()
        } catch {
            made = nil
        }
        // What to close: the dead control connection this one replaces, or this one if it is of no use.
        let (leftover, replaced) = state.withLock { state -> (PostgresConnection?, PostgresConnection?) in
            state.reconnecting = false
            var verified = false
            defer {
                if !verified {
                    state.nextReconnect = .now + state.backoff
                    state.backoff = min(state.backoff * 2, .seconds(5))
                }
            }
            guard let made, !state.closed else { return (made, nil) }
            guard let server = made.backendIdentity?.server else {
                return (made, nil)  // unverified (a pooler): useless as a control connection
            }
            verified = true
            let replaced = state.control
            state.control = made
            state.server = server
            state.backoff = .milliseconds(100)
            return (nil, replaced)
        }
        await leftover?.handle?.close()
        await replaced?.handle?.close()
    }

    /// Opens the control connection now if there is none and the channel can reconnect (a pool calls it when
    /// it opens a connection, so that the first cancel already finds the fast path). Returns when the attempt
    /// ended; does nothing while another attempt is under way.
    public func connectIfNeeded() async {
        let start = state.withLock { state -> Bool in
            guard reconnect != nil, !state.closed, !state.reconnecting else { return false }
            if let control = state.control, !control.isBroken { return false }
            guard ContinuousClock.now >= state.nextReconnect else { return false }
            state.reconnecting = true
            return true
        }
        if start { await reconnectControl() }
    }

    /// Closes the control connection after the work in progress ended.
    public func close() async {
        let control = state.withLock { state -> PostgresConnection? in
            state.closed = true
            defer { state.control = nil }
            return state.control
        }
        await work.waitForAll()
        let late = state.withLock { state -> PostgresConnection? in
            defer { state.control = nil }
            return state.control
        }
        await control?.handle?.close()
        await late?.handle?.close()
    }
}
