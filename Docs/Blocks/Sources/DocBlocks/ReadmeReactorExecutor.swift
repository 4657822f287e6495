// README, "The reactor": tasks that prefer the reactor as their executor. Glue: the function around the statements.
import PostgresAdapter
import ResourceKitIO

func readmeReactorExecutor(pool: PostgresPool) async throws {  // glue
    // snippet: readme-reactor-executor
    try await withTaskExecutorPreference(IOReactor.shared) {
        try await withThrowingDiscardingTaskGroup { group in
            for _ in 0..<64 { group.addTask { try await handleRequests(pool) } }  // children inherit the preference
        }
    }
    // end snippet
}  // glue

/// The reader's own request loop: one query per request.
func handleRequests(_ pool: PostgresPool) async throws {
    for _ in 0..<100 {
        _ = try await pool.withConnection { try await $0.query("SELECT 1") }
    }
}
