import ResourceKit

/// How full a ``PostgresPool`` is at one instant.
public struct PoolOccupancy: Sendable, Hashable {
    /// Open connections (idle, leased, being cleaned or opened).
    public var open: Int
    /// Idle connections.
    public var idle: Int
    /// Tasks waiting for a connection.
    public var waiters: Int
    /// Shared statements (``PostgresPool/execute(_:_:)``) waiting for a connection's next batch.
    public var queuedStatements: Int = 0
}
