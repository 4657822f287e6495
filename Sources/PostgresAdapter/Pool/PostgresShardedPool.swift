import ResourceKit
public import ResourceKitIO
import Synchronization

/// A ``PostgresPool`` per reactor of an `IOReactorGroup`: the thread-per-core shape of a pool.
///
/// Each shard is an ordinary pool whose connections wait on one reactor of the group. A task that prefers that
/// reactor as its executor and leases from its own shard never leaves the reactor's thread: the query's answer
/// wakes that thread, which runs the task's next step at once, with no hop to the cooperative pool or to another
/// core. Under a load of many concurrent queries that is the cheapest shape this library has (the bench's sharded
/// rows, `Benchmarks/Results/`). Start the work that queries on the group's reactors:
///
/// ```swift
/// let pool = try PostgresShardedPool(conninfo: url, maxConnections: 16)   // over IOReactorGroup.shared
/// try await withThrowingDiscardingTaskGroup { group in
///     for request in requests {
///         group.addTask(executorPreference: pool.reactors.next()) {
///             try await pool.withConnection { try await $0.query("SELECT $1::int", [request]) }
///         }
///     }
/// }
/// ```
///
/// Which shard a lease uses: the one of the reactor whose thread runs the caller; a caller elsewhere (the
/// cooperative pool) takes the shards in turn. A lease queues on its shard even when another shard has an idle
/// connection: that is the price of staying on one thread, and the reason to spread work over the reactors evenly
/// (`IOReactorGroup.next()` does). `maxConnections` is split over the shards (the first shards take the
/// remainder; never more shards than connections), and with `cancelFastPath` each shard keeps its own control
/// connection.
///
/// Cancellation is the shards': see ``PostgresPool`` (a queued lease leaves the queue at once and throws, the
/// borrowing scope reaches every operation on the leased connection).
public final class PostgresShardedPool: Sendable {
    /// The pools, one per reactor of ``reactors`` in the group's order (fewer when `maxConnections` is smaller).
    public let shards: [PostgresPool]
    /// The reactors the shards' connections wait on.
    public let reactors: IOReactorGroup
    /// The next shard for a caller that runs on none of them. The pool's own: taking turns from the group's counter
    /// would skew the reactors that `reactors.next()` hands out for new work.
    private let turn = Atomic<Int>(0)

    /// Creates one pool per reactor of `reactors`; connections open lazily.
    /// - Parameters:
    ///   - conninfo: a conninfo string or a `postgres://` URL, used for every connection.
    ///   - maxConnections: the most connections open at once, over all shards (at least one per shard).
    ///   - reactors: the group whose reactors the shards wait on.
    ///   - configuration: every shard's (``PostgresPool/Configuration``): with `cancelFastPath`, each shard keeps
    ///     its own control connection; `pipelineDepth` is per connection, as in a single pool.
    /// - Throws: ``PostgresError/Code/invalidConfiguration`` for a malformed conninfo or URL.
    public init(
        conninfo: String,
        maxConnections: Int,
        reactors: IOReactorGroup = .shared,
        configuration: PostgresPool.Configuration = .init()
    ) throws {
        let total = max(1, maxConnections)
        let count = min(reactors.count, total)
        self.reactors = reactors
        shards = try (0..<count).map { index in
            try PostgresPool(
                conninfo: conninfo, maxConnections: total / count + (index < total % count ? 1 : 0),
                reactor: reactors.reactors[index], configuration: configuration)
        }
    }

    /// The most connections open at once, over all shards.
    public var maxConnections: Int { shards.reduce(0) { $0 + $1.maxConnections } }

    /// The index of the shard a lease made now, from this thread, would use: the caller's reactor's, if it runs on
    /// one of the shards' reactors, else `nil` (the lease then takes the next shard in turn).
    public var currentShard: Int? {
        reactors.currentIndex.flatMap { $0 < shards.count ? $0 : nil }
    }

    /// Leases a connection from the caller's shard (see the type's documentation) for `body` and returns it
    /// afterwards, as ``PostgresPool/withConnection(_:)`` does (also when `body` throws or is cancelled).
    /// Cancellation: as ``PostgresPool``'s.
    public func withConnection<T>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await shards[shardForCaller()].withConnection(body)
    }

    /// Runs one shared statement on the caller's shard (see the type's documentation), as
    /// ``PostgresPool/execute(_:_:)`` does: pipelined with other tasks' statements on the shard's connections.
    /// Cancellation, refusals and errors: as ``PostgresPool/execute(_:_:)``'s.
    @discardableResult
    public func execute(_ sql: String, _ binds: [any PostgresEncodable] = []) async throws -> PostgresResult {
        try await shards[shardForCaller()].execute(sql, binds)
    }

    /// Runs a shared statement on the caller's shard and returns its rows, as ``PostgresPool/query(_:_:)`` does.
    public func query(_ sql: String, _ binds: [any PostgresEncodable] = []) async throws -> [PostgresRow] {
        try await execute(sql, binds).rows
    }

    private func shardForCaller() -> Int {
        currentShard ?? (turn.add(1, ordering: .relaxed).oldValue & Int.max) % shards.count
    }

    /// How full each shard is now, in the shards' order.
    public var occupancy: [PoolOccupancy] {
        shards.map(\.occupancy)
    }

    /// Shuts every shard down (see ``PostgresPool/shutdown()``); returns when all of them are done. The reactors
    /// are the group's: shut a group you made down after its pools.
    public func shutdown() async {
        await withTaskGroup(of: Void.self) { group in
            for shard in shards { group.addTask { await shard.shutdown() } }
        }
    }
}
