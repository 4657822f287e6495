import CLibPQ
public import ResourceKit

/// A bounded pool of ``PostgresConnection``s.
///
/// Cancellation: waiting for a connection is cancellable: the waiter leaves the queue at once, and a
/// connection handed to it at the same instant goes back to the pool (never leaked). A connection returned in
/// an unknown state is never handed out as is: broken ones are closed and replaced; one with a cancelled query
/// still draining, a cancel request in flight, or an open transaction is cleaned (drain, wait for the cancel
/// request, `ROLLBACK`) before its next query runs, bounded by the connection's `cancelTimeout`, past which it
/// is discarded.
public final class PostgresPool: Sendable {
    private typealias Machine = PoolStateMachine<PostgresConnection, CancellationCell<PostgresConnection>>

    /// A marker: a slot freed up, lease again.
    private struct Retry: Error {}

    private let conninfo: String
    /// The most connections open at once.
    public let maxConnections: Int
    private let registry: ResourceRegistry
    private let reactor: IOReactor
    private let machine: Locked<Machine>
    private let nextID = Locked<UInt64>(0)
    private let cancelFastPath: Bool
    private let channel = Locked<(tried: Bool, channel: PostgresCancelChannel?)>((false, nil))

    /// Creates a pool; connections open lazily.
    /// - Throws: ``PostgresError/Kind/invalidConfiguration`` for a malformed conninfo or URL.
    /// - Parameter cancelFastPath: keep one extra control connection and cancel with `pg_cancel_backend`
    ///   (see ``PostgresCancelChannel``); cancel requests remain the fallback.
    public init(
        conninfo: String,
        maxConnections: Int,
        registry: ResourceRegistry = .shared,
        reactor: IOReactor = .shared,
        cancelFastPath: Bool = true
    ) throws {
        _ = try ConnectionInfo.validate(conninfo)
        self.conninfo = conninfo
        self.maxConnections = max(1, maxConnections)
        self.registry = registry
        self.reactor = reactor
        self.machine = Locked(Machine(capacity: max(1, maxConnections)))
        self.cancelFastPath = cancelFastPath
    }

    /// The fast-path channel, connected on first need; `nil` when off or its control connection failed.
    public var cancelChannel: PostgresCancelChannel? { channel.withLock { $0.channel } }

    private func prepareChannel() async -> PostgresCancelChannel? {
        let first = channel.withLock { state -> Bool in
            defer { state.tried = true }
            return cancelFastPath && !state.tried
        }
        if !first { return channel.withLock { $0.channel } }
        do {
            let control = try await PostgresConnection.connect(conninfo, in: nil, registry: registry, reactor: reactor)
            let made = PostgresCancelChannel(control: control)
            channel.withLock { $0.channel = made }
            return made
        } catch {
            return nil  // no fast path: cancel requests only
        }
    }

    /// Open connections (idle and leased).
    public var openCount: Int { machine.withLock { $0.total } }
    /// Idle connections.
    public var idleCount: Int { machine.withLock { $0.idle.count } }
    /// Tasks waiting for a connection.
    public var waiterCount: Int { machine.withLock { $0.waiters.count } }

    /// Leases a connection for `body` and returns it afterwards (also when `body` throws or is cancelled).
    /// Cancellation: see the type's documentation; queries inside `body` behave as on any connection.
    public func withConnection<T>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        let connection = try await lease()
        let value: T
        do {
            value = try await body(connection)
        } catch {
            await release(connection)
            throw error
        }
        await release(connection)
        return value
    }

    private enum Decision { case use, open, wait, fail }

    private func lease() async throws -> PostgresConnection {
        while true {
            try Task.checkCancellation()
            let id = nextID.withLock { $0 += 1; return $0 }
            var decision: Decision?
            let cell = CancellationCell<PostgresConnection>()
            do {
                return try await cell.run(onCancel: { [weak self] _ in
                    _ = self?.machine.withLock { $0.cancel(id: id) }
                }) { cell in
                    // Parked inside the start closure: a handover can never come before the suspension.
                    switch machine.withLock({ $0.lease(id: id, waiter: cell) }) {
                    case .use(let connection):
                        decision = .use
                        if !cell.succeed(connection) { giveBack(connection) }
                    case .open:
                        decision = .open
                        cell.fail(Retry())
                    case .wait:
                        decision = .wait
                    case .fail:
                        decision = .fail
                        cell.fail(PostgresError(.poolClosed, "the pool was shut down"))
                    }
                }
            } catch is Retry where decision != .open {
                continue
            } catch is Retry {
                // Our slot: open a connection for this lease.
                do {
                    let connection = try await PostgresConnection.connect(conninfo, in: nil, registry: registry, reactor: reactor)
                    connection.useCancelChannel(await prepareChannel())
                    return connection
                } catch {
                    if let waiter = machine.withLock({ $0.openFailed() }) { waiter.fail(Retry()) }
                    throw error
                }
            } catch {
                if decision == .open, !(error is Retry) {
                    // Cancelled at the instant the slot was reserved: give the slot back.
                    if let waiter = machine.withLock({ $0.openFailed() }) { waiter.fail(Retry()) }
                }
                throw error
            }
        }
    }

    /// Hands a healthy connection to the next waiter still waiting, or keeps it idle.
    private func giveBack(_ connection: PostgresConnection) {
        while true {
            switch machine.withLock({ $0.release(connection, reusable: true) }) {
            case .handOver(let connection, let waiter):
                if waiter.succeed(connection) { return }
                // That waiter was cancelled at this instant: try the next one.
            case .keepIdle, .none:
                return
            case .retry(let waiter):
                waiter.fail(Retry())
                return
            case .close(let connection):
                Task { await connection.handle?.close() }
                return
            }
        }
    }

    private func release(_ connection: PostgresConnection) async {
        connection.markForResetIfNeeded()
        if connection.isBroken {
            await connection.handle?.close()
            switch machine.withLock({ $0.release(connection, reusable: false) }) {
            case .retry(let waiter): waiter.fail(Retry())
            default: break
            }
            return
        }
        if machine.withLock({ $0.closed }) {
            _ = machine.withLock { $0.release(connection, reusable: true) }
            await connection.handle?.close()
            return
        }
        giveBack(connection)
    }

    /// Shuts the pool down: waiters fail with ``PostgresError/Kind/poolClosed``, idle connections are closed
    /// now, leased ones when they come back.
    public func shutdown() async {
        let (idle, waiters) = machine.withLock { $0.close() }
        for waiter in waiters { waiter.fail(PostgresError(.poolClosed, "the pool was shut down")) }
        for connection in idle { await connection.handle?.close() }
        await channel.withLock { $0.channel }?.close()
    }
}

extension PostgresConnection {
    /// On return to a pool: an open or failed transaction is rolled back before the next use.
    func markForResetIfNeeded() {
        state.withLock { state in
            guard let conn = state.conn?.raw, !state.busy else { return }
            let status = PQtransactionStatus(conn)
            if status == PQTRANS_INTRANS || status == PQTRANS_INERROR { state.needsRollback = true }
            if status == PQTRANS_UNKNOWN { state.broken = true }
        }
    }
}
