// README, "The reactor": a reactor per core and a pool per reactor. Glue: the function around the statements.
import PostgresAdapter
import ResourceKitIO

func readmeShardedPool(conninfo: String) async throws {  // glue
    // snippet: readme-sharded-pool
    let pool = try PostgresShardedPool(conninfo: conninfo, maxConnections: 16)  // over IOReactorGroup.shared
    try await withThrowingDiscardingTaskGroup { group in
        for _ in 0..<64 {
            // Each task runs on a reactor of the group and leases from that reactor's shard.
            group.addTask(executorPreference: pool.reactors.next()) { try await handleRequests(pool) }
        }
    }
    await pool.shutdown()
    // end snippet
}  // glue

/// The reader's own request loop over a sharded pool: one query per request.
func handleRequests(_ pool: PostgresShardedPool) async throws {
    for _ in 0..<100 {
        _ = try await pool.withConnection { try await $0.query("SELECT 1") }
    }
}
