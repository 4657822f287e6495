import CLibPQ
public import ResourceKit
public import ResourceKitIO
import Synchronization

/// A bounded pool of ``PostgresConnection``s.
///
/// - A lessee only ever gets a connection that is clean and alive: a returned connection with a cancelled
///   query to drain, a cancel in flight or an open transaction is cleaned by the pool *before* anyone sees it
///   (bounded by the connection's `cancelTimeout`, past which it is discarded), and every idle connection is
///   checked on lease without waiting (a zero-timeout read: the server closed it, a restart, an
///   `idle_session_timeout`) and replaced by a fresh one if dead. After a server restart with an idle pool of
///   N, the next N queries all succeed. A connection handed from one lessee straight to a queued one never
///   sat idle and is not looked at: it finished an operation a moment ago (a backend that dies in that
///   instant fails the next query with ``PostgresError/Code/connection``, as one dying after the look would).
/// - The fast cancel path (`cancelFastPath:` in `init`) keeps one control connection and uses it only for connections
///   whose backend is verified to be on the control connection's server; everything else (a pooler, a
///   balancer, a dead control connection) uses cancel requests. ``cancelStatistics`` says which path each
///   cancel took.
///
/// - Every wait has a bound: each connection opens with a `connect_timeout` (``connectTimeout`` unless the
///   conninfo sets one), so a silent server never holds a slot; when an open fails or times out, that caller
///   and every task waiting for a connection get its ``PostgresError`` (`connectionTimedOut` or `connection`)
///   at once, and the slot is freed.
///
/// - Shared statements: ``execute(_:_:)`` and ``query(_:_:)`` run one statement on a free connection or, under
///   load, pipelined with other tasks' statements on a shared one (many statements per round trip); see there.
///
/// Cancellation: waiting for a connection is cancellable: the waiter leaves the queue at once and throws. A cancel
/// and a connection (or a free slot) handed to the waiter at the same instant are ordered by the pool's lock:
/// either the waiter leaves (the connection goes to the next one or stays idle) or it gets the connection, and
/// its next query then sees the cancel; nothing is leaked either way. The
/// calling task's scope is the *borrowing scope* of the wait and of every operation on the leased connection
/// (Docs/Architecture.md, "Three levels of cancellation"): its deadline and `ResourceScope.cancel()` end them
/// with `DeadlineExceededError` or `CancellationError`, the query is cancelled on the server, and the pool
/// cleans the connection and keeps it. Queries inside `withConnection` otherwise behave as on any connection.
public final class PostgresPool: Sendable {
    typealias Machine = PoolStateMachine<
        PostgresConnection, LeaseWaiter, WaiterContinuation<PostgresResult>, SharedWire
    >
    typealias SharedMachine = SharedStatementMachine<WaiterContinuation<PostgresResult>, SharedWire>

    /// A queued lease's continuation: the machine hands each waiter out exactly once (it leaves the queue in the
    /// same step), so it is the core's ``WaiterContinuation`` (unsafe; checked in the sanitizer passes).
    typealias LeaseWaiter = WaiterContinuation<Grant>

    /// What a waiter is handed.
    enum Grant: Sendable {
        /// A connection that sat idle: looked at before use (``PostgresConnection/isAliveWhileIdle()``).
        case connection(PostgresConnection)
        /// A connection its previous lessee returned clean a moment ago: used as it is.
        case handedOver(PostgresConnection)
        /// A slot: open a new connection in it.
        case slot
    }

    private let conninfo: String
    /// The most connections open at once (the control connection of the fast path is not counted).
    public let maxConnections: Int
    /// How the pool runs its connections, as given to `init`.
    public let configuration: Configuration
    var registry: ResourceRegistry { configuration.registry }
    let reactor: IOReactor
    /// The pool's one machine under its one lock: leases, its life, and the shared statements' queue and drivers
    /// (``execute(_:_:)``).
    private let machine: Locked<Machine>
    /// Where the next connection asks for its vanished-client check (a lock of its own: asked and told around
    /// an open, never inside the machine's).
    let nextID = Atomic<UInt64>(0)
    private var onNotice: (@Sendable (PostgresNotice) -> Void)? { configuration.onNotice }
    let background = OwnedTasks()
    private let occupancyChanges = Broadcast<PoolOccupancy>()
    /// The fast-path channel (`nil` when off).
    public let cancelChannel: PostgresCancelChannel?
    /// What each connection's server session is asked for (``PostgresSessionOptions``).
    public var session: PostgresSessionOptions { configuration.session }
    /// Each host attempt's bound when the conninfo sets no `connect_timeout` (libpq's meaning: per host).
    public var connectTimeout: Duration { configuration.connectTimeout }
    /// Which path each cancel of the pool's connections took.
    public let cancelStatistics = PostgresCancelStatistics()

    /// Creates a pool; connections open lazily.
    /// - Parameters:
    ///   - conninfo: a conninfo string or a `postgres://` URL, used for every connection.
    ///   - maxConnections: the most connections open at once.
    ///   - reactor: the reactor the connections wait on.
    ///   - configuration: the registry, the cancel fast path, the session, the connect timeout, the pipeline depth
    ///     and the notice handler (``Configuration``).
    /// - Throws: ``PostgresError/Code/invalidConfiguration`` for a malformed conninfo or URL.
    public init(
        conninfo: String, maxConnections: Int, reactor: IOReactor = .shared, configuration: Configuration
    ) throws {
        _ = try ConnectionInfo(conninfo)
        self.configuration = configuration
        self.conninfo = conninfo
        self.maxConnections = max(1, maxConnections)
        self.reactor = reactor
        self.machine = Locked(Machine(capacity: max(1, maxConnections), pipelineDepth: configuration.pipelineDepth))
        if configuration.cancelFastPath {
            cancelChannel = PostgresCancelChannel { [conninfo, reactor, configuration] in
                try await PostgresConnection.connect(
                    conninfo, in: nil,
                    configuration: .init(
                        registry: configuration.registry, reactor: reactor,
                        connectTimeout: configuration.connectTimeout, onNotice: configuration.onNotice))
            }
        } else {
            cancelChannel = nil
        }
    }

    /// Creates a pool; connections open lazily. The same as ``init(conninfo:maxConnections:reactor:configuration:)``
    /// with the configuration's values given one by one.
    /// - Parameters:
    ///   - conninfo: a conninfo string or a `postgres://` URL, used for every connection.
    ///   - maxConnections: the most connections open at once.
    ///   - registry: where the pool's connections are recorded.
    ///   - reactor: the reactor the connections wait on.
    ///   - cancelFastPath: keep one extra control connection and cancel with `pg_cancel_backend` where that is
    ///     proven safe (see ``PostgresCancelChannel``); cancel requests remain the fallback.
    ///   - session: what each connection's server session is asked for (``PostgresSessionOptions``).
    ///   - connectTimeout: bounds each host attempt of an open when the conninfo sets no `connect_timeout`
    ///     (10 s by default; at least 2 s, as in libpq), so that a silent server never holds a slot forever.
    ///   - pipelineDepth: the most statements of ``execute(_:_:)`` sent on one connection at a time (at least 1).
    ///   - onNotice: receives every connection's notices (see ``PostgresNotice``); `nil`: registry events.
    /// - Throws: ``PostgresError/Code/invalidConfiguration`` for a malformed conninfo or URL.
    public convenience init(
        conninfo: String,
        maxConnections: Int,
        registry: ResourceRegistry = .shared,
        reactor: IOReactor = .shared,
        cancelFastPath: Bool = true,
        session: PostgresSessionOptions = PostgresSessionOptions(),
        connectTimeout: Duration = .seconds(10),
        pipelineDepth: Int = 8,
        onNotice: (@Sendable (PostgresNotice) -> Void)? = nil
    ) throws {
        try self.init(
            conninfo: conninfo, maxConnections: maxConnections, reactor: reactor,
            configuration: Configuration(
                registry: registry, cancelFastPath: cancelFastPath, session: session, connectTimeout: connectTimeout,
                pipelineDepth: pipelineDepth, onNotice: onNotice))
    }

    /// Open connections (idle, leased, being cleaned or opened).
    public var openCount: Int { machine.withLock { $0.total } }
    /// Idle connections.
    public var idleCount: Int { machine.withLock { $0.idle.count } }
    /// Tasks waiting for a connection.
    public var waiterCount: Int { machine.withLock { $0.waiters.count } }
    /// Returned connections being cleaned before their next lease.
    public var resettingCount: Int { machine.withLock { $0.resetting } }

    /// How full the pool is now (open, idle, waiting and queued counts read together, under the pool's lock).
    public var occupancy: PoolOccupancy { machine.withLock(occupancy) }

    /// How full the pool is now, then after every change: to wait for "every connection is leased" or "twelve
    /// tasks are queued" as an event, or to feed a gauge. The stream ends when its consumer stops iterating.
    public func occupancyUpdates() -> AsyncStream<PoolOccupancy> {
        occupancyChanges.subscribe(bufferingNewest: 64) { machine.withLock(occupancy) }
    }

    /// Under the pool's lock.
    private func occupancy(_ machine: inout Machine) -> PoolOccupancy {
        PoolOccupancy(
            open: machine.total, idle: machine.idle.count, waiters: machine.waiters.count,
            queuedStatements: machine.shared.pending.count)
    }

    /// Runs `body` on the pool's machine under its lock; publishes the occupancy after it if it changed and
    /// anyone listens. `body` never calls a connection (a connection's lock may be held around this call, as in a
    /// driver's claim, never taken inside it).
    func withMachine<Result>(_ body: (inout Machine) -> Result) -> Result {
        let (result, changed) = machine.withLock { machine -> (Result, PoolOccupancy?) in
            guard occupancyChanges.hasSubscribers else { return (body(&machine), nil) }
            let before = occupancy(&machine)
            let result = body(&machine)
            let after = occupancy(&machine)
            return (result, after != before ? after : nil)
        }
        if let changed { occupancyChanges.yield(changed) }
        return result
    }

    /// Leases a connection for `body` and returns it afterwards (also when `body` throws or is cancelled).
    /// Returning never waits: cleanup after a cancelled query runs in the pool's own background work.
    /// Cancellation: see the type's documentation.
    public func withConnection<T>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        let connection: PostgresConnection
        do {
            connection = try await lease()
        } catch {
            // The caller asked for work that ended before any statement ran (its deadline passed, or it was
            // cancelled, while it waited for a connection): one operation in `resourcekit_operations_total`.
            registry.recordOperation(OperationOutcome(error: error), kind: PostgresConnection.kind)
            throw error
        }
        CooperativeLoad.postgres.leaseTaken()
        defer { CooperativeLoad.postgres.leaseReturned() }
        let value: T
        do {
            value = try await body(connection)
        } catch {
            release(connection)
            throw error
        }
        release(connection)
        return value
    }

    /// How many leases looked at an idle connection before handing it out (for tests).
    let idleLooks = Atomic<Int>(0)

    func lease() async throws -> PostgresConnection {
        try Task.checkCancellation()
        // The common case, an idle connection or a free slot with nobody queued, takes no number and does not
        // suspend; only a lease that has to queue parks (and is then cancellable while it waits).
        let grant: Grant
        switch withMachine({ $0.leaseWithoutWaiting() }) {
        case .use(let connection)?:
            grant = .connection(connection)
        case .open?:
            grant = .slot
        case .fail?:
            throw PostgresError(.poolClosed, "the pool was shut down")
        case .cancelled(let reason)?:
            throw reason.error  // only a numbered lease is refused for an earlier cancel
        case .wait?, nil:
            grant = try await waitForGrant()
        }
        return try await ready(grant)
    }

    /// A lease that does not queue: an idle connection (looked at first) or a free slot (a new connection), when
    /// nobody waits before the caller; `nil` when the caller would have to queue.
    func leaseIfFree() async throws -> PostgresConnection? {
        try Task.checkCancellation()
        switch withMachine({ $0.leaseWithoutWaiting() }) {
        case .use(let connection)?:
            return try await ready(.connection(connection))
        case .open?:
            return try await ready(.slot)
        case .fail?:
            throw PostgresError(.poolClosed, "the pool was shut down")
        case .cancelled(let reason)?:
            throw reason.error
        case .wait?, nil:
            return nil
        }
    }

    /// The connection a grant stands for: a handed-over one as it is, an idle one after a look (replaced if the
    /// server closed it), a slot's new one.
    private func ready(_ grant: Grant) async throws -> PostgresConnection {
        switch grant {
        case .handedOver(let connection):
            return connection
        case .connection(let connection):
            idleLooks.add(1, ordering: .relaxed)
            if connection.isAliveWhileIdle() { return connection }
            // Closed by the server while idle (a restart, idle_session_timeout): replace it in its slot.
            connection.handle?.report("postgres.pool.discardedDead")
            background.start { await connection.handle?.close() }
            return try await open()
        case .slot:
            return try await open()
        }
    }

    /// Queues for a connection or a slot; the queued waiter leaves the queue when its task (or borrowing scope, or
    /// enclosing operation) is cancelled.
    ///
    /// No `CancellationCell`: the pool's lock already decides who gets what, so the queue holds the continuation
    /// itself and every hand-out leaves the queue under that lock (see ``PoolStateMachine``). The lease is
    /// numbered before the cancellation handler is installed, so that a cancel arriving before the lease asked to
    /// queue can name it (the machine keeps the reason until it asks).
    private func waitForGrant() async throws -> Grant {
        let lease = PoolWaiter(pool: self, id: nextID.add(1, ordering: .relaxed).newValue, kind: .lease)
        let links = CancellationLinks.joinCallersLevels(lease)
        defer { links.leave(lease) }
        return try await withTaskCancellationHandler {
            try await parkInQueue(lease)
        } onCancel: {
            lease.cancel(.cancelled)
        }
    }

    private func parkInQueue(_ lease: PoolWaiter) async throws -> Grant {
        try await suspendOnWaiter { ask(lease, waiter: $0) }
    }

    /// The lease asks the machine, once; parked, or resumed at once with what it got.
    private func ask(_ lease: PoolWaiter, waiter: LeaseWaiter) {
        let action = withMachine { machine -> Machine.LeaseAction in
            // Under the lock, with the ask itself: a cancel from now on looks in the queue.
            lease.asked.store(true, ordering: .relaxed)
            return machine.lease(id: lease.id, waiter: waiter)
        }
        switch action {
        case .use(let connection):
            waiter.resume(returning: .connection(connection))
        case .open:
            waiter.resume(returning: .slot)
        case .wait:
            break
        case .fail:
            waiter.resume(throwing: PostgresError(.poolClosed, "the pool was shut down"))
        case .cancelled(let reason):
            waiter.resume(throwing: reason.error)
        }
    }

    /// A queued lease was cancelled (its task, its borrowing scope or its enclosing operation): it leaves the
    /// queue at once, or, if it has not asked yet, finds the reason when it does.
    func cancelLease(_ lease: PoolWaiter, _ reason: CancellationReason) {
        let waiter = withMachine { machine in
            machine.cancel(id: lease.id, reason: reason, asked: lease.asked.load(ordering: .relaxed))
        }
        waiter?.resume(throwing: reason.error)
    }

    /// Opens a connection in a slot the caller holds; gives the slot up if that fails.
    private func open() async throws -> PostgresConnection {
        do {
            let connection = try await connectAsPlanned()
            if let cancelChannel {
                await cancelChannel.connectIfNeeded()
                connection.useCancelChannel(cancelChannel)
            }
            return connection
        } catch {
            if let failure = error as? PostgresError, failure.code == .connection || failure.code == .connectionTimedOut
            {
                // The server is unreachable or silent: the tasks queued behind this open would only repeat it.
                for waiter in withMachine({ $0.openFailed() }) { waiter.resume(throwing: failure) }
            }
            giveUpSlot()
            throw error
        }
    }

    /// Opens one connection, asking for the vanished-client check where ``StartupSettingsPlan`` says: a refusal of
    /// the startup packet's setting turns the plan for good and opens again at once, asking after connect.
    private func connectAsPlanned() async throws -> PostgresConnection {
        // Only a pool that resets its sessions gains from it (``StartupSettingsPlan``).
        let atStartup = session.resetsBetweenUsers && withMachine { $0.startupPlan.asksInStartupPacket }
        var configuration = PostgresConnection.Configuration(
            registry: registry, reactor: reactor, statistics: cancelStatistics, session: session,
            connectTimeout: connectTimeout, onNotice: onNotice)
        configuration.asksCheckIntervalAtStartup = atStartup
        do {
            return try await PostgresConnection.connect(conninfo, in: nil, configuration: configuration)
        } catch let error as PostgresError where atStartup && error.code == .connection {
            guard withMachine({ $0.startupPlan.startupPacketFailed(error.message) }) else { throw error }
            configuration.asksCheckIntervalAtStartup = false
            let connection = try await PostgresConnection.connect(conninfo, in: nil, configuration: configuration)
            connection.handle?.report("postgres.pool.startupSettingRefused")
            return connection
        }
    }

    /// A slot nobody uses any more: to the first waiter, or freed.
    private func giveUpSlot() {
        withMachine { $0.slotFreed() }?.resume(returning: .slot)
    }

    /// Performs a release decision (outside the lock).
    private func perform(_ action: Machine.ReleaseAction) {
        switch action {
        case .keepIdle:
            return
        case .handOver(let connection, let waiter):
            waiter.resume(returning: .handedOver(connection))
        case .reset(let connection):
            background.start {
                let clean = await connection.resetForReuse()
                self.perform(self.withMachine { $0.resetFinished(connection, clean: clean) })
            }
        case .close(let connection):
            background.start { await connection.handle?.close() }
        case .closeAndOpenFor(let connection, let waiter):
            background.start { await connection.handle?.close() }
            waiter.resume(returning: .slot)
        }
    }

    func release(_ connection: PostgresConnection) {
        let returned = connection.returnedState(resettingSession: session.resetsBetweenUsers)
        perform(withMachine { $0.release(connection, returned) })
    }

    /// Shuts the pool down: waiters and queued shared statements (``execute(_:_:)``) fail with
    /// ``PostgresError/Code/poolClosed``, idle connections are closed now, leased ones when they come back (shared
    /// statements already sent get their outcome first); returns when the pool's own background work (cleanups,
    /// closes, shared statements) and its control connection are done.
    public func shutdown() async {
        let (idle, waiters, statements) = withMachine { $0.close() }
        for waiter in waiters { waiter.resume(throwing: PostgresError(.poolClosed, "the pool was shut down")) }
        for waiter in statements { waiter.resume(throwing: PostgresError(.poolClosed, "the pool was shut down")) }
        for connection in idle { await connection.handle?.close() }
        await background.waitForAll()
        await cancelChannel?.close()
    }
}

#if canImport(Glibc)
import Glibc
#endif
