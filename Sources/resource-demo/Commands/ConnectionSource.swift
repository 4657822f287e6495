import PostgresAdapter

/// Where `serve` leases its Postgres connections: one pool on the cooperative pool's side, or a pool per reactor
/// (`serve --reactors N`). Cancellation: the pools' own (a queued lease leaves the queue at once and throws).
protocol ConnectionSource: Sendable {
    /// Leases a connection for `body` and returns it afterwards. `nonisolated(nonsending)`, as the pools'
    /// own (the runtime libraries run on their caller's executor: Docs/Architecture.md, "Where code runs").
    nonisolated(nonsending) func withConnection<T>(
        _ body: nonisolated(nonsending) (PostgresConnection) async throws -> T
    ) async throws -> T
    /// Shuts the pool (or every shard) down.
    nonisolated(nonsending) func shutdown() async
}

extension PostgresPool: ConnectionSource {}
extension PostgresShardedPool: ConnectionSource {}
