import PostgresAdapter
import ResourceKit

// README, "Three levels of cancellation". Glue: the function around the statements and its parameter.
// snippet: readme-borrowing-scope
func borrowingScope(id: Int) async throws {  // glue
    let pool = try PostgresPool(conninfo: "host=db user=app connect_timeout=2", maxConnections: 16)

    // In a request handler: the pool's wait, the query, and the cancel on the server all obey this deadline.
    try await withResourceScope("request", deadline: .now + .milliseconds(300)) { _ in
        try await pool.withConnection { try await $0.query("SELECT slow_report($1)", [id]) }
    }   // DeadlineExceededError after 300 ms; the query is gone from pg_stat_activity; the connection is kept
}  // glue
// end snippet
