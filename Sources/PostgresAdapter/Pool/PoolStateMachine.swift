/// The pool's decisions as a value: who gets which connection, when to open one, when a waiter leaves.
/// Tested without I/O; ``PostgresPool`` performs the actions.
struct PoolStateMachine<Connection: AnyObject, Waiter> {
    private(set) var idle: [Connection] = []
    /// Open plus opening connections.
    private(set) var total = 0
    let capacity: Int
    private(set) var waiters: [(id: UInt64, waiter: Waiter)] = []
    private(set) var closed = false

    init(capacity: Int) { self.capacity = max(1, capacity) }

    enum LeaseAction {
        case use(Connection)
        /// Open a new connection for this lease (already counted in `total`).
        case open
        /// Park the waiter.
        case wait
        case fail
    }

    mutating func lease(id: UInt64, waiter: Waiter) -> LeaseAction {
        if closed { return .fail }
        if let connection = idle.popLast() { return .use(connection) }
        if total < capacity {
            total += 1
            return .open
        }
        waiters.append((id, waiter))
        return .wait
    }

    enum ReleaseAction {
        /// Hand the connection to this waiter (if the waiter turns out cancelled, release it again).
        case handOver(Connection, Waiter)
        case keepIdle
        /// The connection was discarded: this waiter should lease again (a slot is free now).
        case retry(Waiter)
        case none
        /// The pool is closed: close the connection.
        case close(Connection)
    }

    /// A connection comes back; `reusable` is false when it is broken (it is then discarded).
    mutating func release(_ connection: Connection, reusable: Bool) -> ReleaseAction {
        if closed {
            total -= 1
            return .close(connection)
        }
        if reusable {
            if !waiters.isEmpty {
                return .handOver(connection, waiters.removeFirst().waiter)
            }
            idle.append(connection)
            return .keepIdle
        }
        total -= 1
        if !waiters.isEmpty {
            return .retry(waiters.removeFirst().waiter)
        }
        return .none
    }

    /// Opening a connection failed (or its lessee left): free its slot; a parked waiter should lease again.
    mutating func openFailed() -> Waiter? {
        total -= 1
        if !closed, !waiters.isEmpty {
            return waiters.removeFirst().waiter
        }
        return nil
    }

    /// A parked waiter was cancelled: it leaves the queue at once. Returns `false` if it was not parked (it
    /// was already handed a connection, which then comes back through `release`).
    mutating func cancel(id: UInt64) -> Bool {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return false }
        waiters.remove(at: index)
        return true
    }

    /// Closes the pool: idle connections and parked waiters are returned to be closed and failed.
    mutating func close() -> (idle: [Connection], waiters: [Waiter]) {
        closed = true
        defer {
            total -= idle.count
            idle = []
            waiters = []
        }
        return (idle, waiters.map(\.waiter))
    }
}

extension PoolStateMachine: Sendable where Connection: Sendable, Waiter: Sendable {}
