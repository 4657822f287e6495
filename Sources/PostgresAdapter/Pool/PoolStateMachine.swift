import ResourceKit

/// The pool's one machine, as a value: its life (``Lifecycle``), who gets which connection, when to open one,
/// when a returned connection is cleaned before anyone sees it, when a waiter leaves, and the shared statements'
/// queue and drivers (``SharedStatementMachine``, held inside it). Tested without I/O (`PoolStateMachineTests`,
/// `SharedStatementMachineTests`); ``PostgresPool`` holds it under its one lock and performs the actions after
/// releasing that lock. A decision that needs both halves (a driver stops for a queued lessee, shutdown fails
/// queued lessees and queued statements) reads them in one step.
///
/// Waiters park in a `WaiterQueue` (the core's one queue of cancellable waiters): a waiter this machine hands out
/// (``ReleaseAction/handOver(_:_:)``, ``slotFreed()``, ``cancel(id:reason:asked:)``, ``openFailed()``, ``close()``)
/// has left the queue in the same step, so each is handed out exactly once and the pool resumes it without asking
/// whether it is still there; a cancel that reaches a lease before it asked is kept for its ask. A cancel and a
/// handover at the same instant are ordered by the pool's lock: the waiter either leaves the queue (cancelled)
/// or gets the connection (the cancel came after; its next query sees it).
///
/// Slots: `total` counts every connection the pool is responsible for (idle, leased, being cleaned, being
/// opened). A slot freed by a discarded connection goes straight to the first waiter, who opens a new
/// connection in it.
struct PoolStateMachine<Connection: AnyObject, Waiter, SharedWaiter, Wire> {
    /// The pool's life.
    enum Lifecycle: Equatable, Sendable {
        /// Leases and shared statements are served.
        case running
        /// ``close()`` ran: nothing new is served; connections still leased, being cleaned or opened, and shared
        /// statements' drivers, are finishing.
        case shuttingDown
        /// Shut down, and every connection's slot is given up and every driver has stopped.
        case shutDown
    }

    private(set) var lifecycle = Lifecycle.running
    private(set) var idle: [Connection] = []
    /// Open, opening and resetting connections.
    private(set) var total = 0
    /// Connections being cleaned (drain, cancel, rollback) after their lessee returned them.
    private(set) var resetting = 0
    let capacity: Int
    private(set) var waiters = WaiterQueue<Waiter>()
    /// The shared statements (``PostgresPool/execute(_:_:)``): their queue, drivers and batches. Its events that
    /// do not end a driver are sent to it directly; the ones that do go through this machine (``takeBatch(_:)``,
    /// ``driverStopped(_:)``, ``driverFailed(_:)``), which then settles the pool's life.
    var shared: Shared
    typealias Shared = SharedStatementMachine<SharedWaiter, Wire>

    /// Where the pool's connections ask for their vanished-client check: asked before each open, told what a
    /// failed open showed.
    var startupPlan = StartupSettingsPlan.inStartupPacket

    var isRunning: Bool { lifecycle == .running }

    /// - Parameters:
    ///   - capacity: the most connections at once (at least 1); also the most shared-statement drivers.
    ///   - pipelineDepth: the most shared statements one driver sends at a time.
    init(capacity: Int, pipelineDepth: Int = 1) {
        self.capacity = max(1, capacity)
        self.shared = Shared(depth: pipelineDepth, maxDrivers: self.capacity)
    }

    enum LeaseAction {
        case use(Connection)
        /// Open a new connection for this lease (its slot is counted).
        case open
        /// Park the waiter.
        case wait
        case fail
        /// The lease was cancelled before it asked: throw the reason's error.
        case cancelled(CancellationReason)
    }

    /// A lease that needs no waiter: an idle connection or a free slot, when nobody waits before the caller;
    /// `nil` when the caller has to wait (then ``lease(id:waiter:)`` parks it).
    mutating func leaseWithoutWaiting() -> LeaseAction? {
        if !isRunning { return .fail }
        guard waiters.isEmpty else { return nil }
        if let connection = idle.popLast() { return .use(connection) }
        if total < capacity {
            total += 1
            return .open
        }
        return nil
    }

    mutating func lease(id: UInt64, waiter: Waiter) -> LeaseAction {
        if let reason = waiters.takeCancellation(of: id) { return .cancelled(reason) }
        if let action = leaseWithoutWaiting() { return action }
        waiters.append(waiter, id: id)
        return .wait
    }

    enum ReleaseAction {
        /// Hand the connection to this waiter (it has left the queue).
        case handOver(Connection, Waiter)
        case keepIdle
        /// Clean the connection, then report ``resetFinished(_:clean:)``. Nobody sees it meanwhile.
        case reset(Connection)
        /// Close the connection (discarded, or the pool is closed).
        case close(Connection)
        /// Close the connection; its slot went to this waiter (it has left the queue), who opens a new one.
        case closeAndOpenFor(Connection, Waiter)
    }

    /// A connection comes back from its lessee.
    mutating func release(_ connection: Connection, _ returned: PooledConnectionState) -> ReleaseAction {
        if !isRunning {
            total -= 1
            settle()
            return .close(connection)
        }
        switch returned {
        case .clean:
            if let waiter = waiters.popFirst() { return .handOver(connection, waiter) }
            idle.append(connection)
            return .keepIdle
        case .needsReset:
            resetting += 1
            return .reset(connection)
        case .broken:
            if let waiter = waiters.popFirst() { return .closeAndOpenFor(connection, waiter) }
            total -= 1
            settle()
            return .close(connection)
        }
    }

    /// The cleanup of a returned connection ended.
    mutating func resetFinished(_ connection: Connection, clean: Bool) -> ReleaseAction {
        resetting -= 1
        return release(connection, clean ? .clean : .broken)
    }

    /// A slot was given up (an open failed, its lessee left). The first waiter gets it, or it is freed.
    mutating func slotFreed() -> Waiter? {
        if isRunning, let waiter = waiters.popFirst() { return waiter }
        total -= 1
        settle()
        return nil
    }

    /// Opening a connection failed (the server is unreachable or silent): every parked waiter leaves the queue,
    /// to be failed with that error rather than repeat the attempt one slot at a time.
    mutating func openFailed() -> [Waiter] {
        waiters.removeAll()
    }

    /// Lease `id` was cancelled. `asked`: the lease has called ``lease(id:waiter:)`` already. If it is parked it
    /// leaves the queue and is returned (resume it with the reason's error); if it was handed a connection or a
    /// slot, the cancel came after that and changes nothing (`nil`). A lease that has not asked yet finds the
    /// reason when it does. Only the first reason counts.
    mutating func cancel(id: UInt64, reason: CancellationReason, asked: Bool) -> Waiter? {
        guard case .removed(let waiter) = waiters.cancel(id, reason: reason, asked: asked) else { return nil }
        return waiter
    }

    /// Driver `driver` asks for its next batch: it stops when nothing is queued, the pool is shutting down, or a
    /// lessee waits for a connection of its own (read in the same step).
    mutating func takeBatch(_ driver: Shared.DriverID) -> Shared.TakeAction {
        let action = shared.takeBatch(driver, lesseesWaiting: !waiters.isEmpty)
        settle()
        return action
    }

    /// Driver `driver` stopped (its connection failed): the driver to start in its place, if any.
    mutating func driverStopped(_ driver: Shared.DriverID) -> Shared.DriverID? {
        defer { settle() }
        return shared.driverStopped(driver)
    }

    /// Driver `driver` could not lease a connection: the queued statements to fail, when no other driver is left.
    mutating func driverFailed(_ driver: Shared.DriverID) -> [SharedWaiter] {
        defer { settle() }
        return shared.driverFailed(driver)
    }

    /// Shuts the pool down: idle connections, parked lessees and queued shared statements are returned, to be
    /// closed and failed; leased connections are closed when they come back. Only the first call returns any.
    mutating func close() -> (idle: [Connection], waiters: [Waiter], statements: [SharedWaiter]) {
        guard isRunning else { return ([], [], []) }
        lifecycle = .shuttingDown
        let closing = idle
        total -= idle.count
        idle = []
        let result = (closing, waiters.removeAll(), shared.close())
        settle()
        return result
    }

    /// Shutting down ends when no connection is left (open, opening, being cleaned or leased) and no driver.
    private mutating func settle() {
        if lifecycle == .shuttingDown, total == 0, shared.driverCount == 0 { lifecycle = .shutDown }
    }
}

extension PoolStateMachine: Sendable
where Connection: Sendable, Waiter: Sendable, SharedWaiter: Sendable, Wire: Sendable {}

/// How a connection comes back to the pool.
enum PooledConnectionState: Sendable, Equatable {
    /// Ready for the next lessee.
    case clean
    /// Clean it first (a cancelled query to drain, a cancel in flight, a transaction to roll back).
    case needsReset
    /// Lost or in an unknown state: discard it.
    case broken
}
