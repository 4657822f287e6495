import PostgresAdapter
import ResourceKit
import ResourceKitPatterns

// README, "Patterns". Glue: a function around each block's statements, whose parameters are what the block
// names without declaring (the client's connection, a legacy index, a logger), and those types below.

// snippet: readme-latest-task
func latestTask(connectionScope: ResourceScope, pool: PostgresPool, client: SearchClient) async throws {  // glue
    // Bind it to the connection's scope, not to one request's: it lives as long as the client does.
    let search = try await LatestTask.start(in: connectionScope, "search", debounce: .milliseconds(300)) { term, scope in
        try await pool.withConnection { try await $0.query("SELECT name FROM items WHERE name LIKE $1", [term + "%"]) }
    }
    for try await term in client.lines { search.update(id: term) }     // 20 keystrokes in 200 ms: one query
    for await result in search.output.updates() { client.send(result.value) }
}  // glue
// end snippet

// snippet: readme-latest-value
func latestValue(results: LatestValue<[String]>, legacyIndex: LegacyIndex, term: String) async throws {  // glue
    let ticket = results.begin()                       // supersedes every earlier ticket
    let hits = try await legacyIndex.lookup(term)      // may answer after a newer lookup
    results.commit(hits, for: ticket)                  // dropped (and counted) if stale
}  // glue
// end snippet

// snippet: readme-outcome
func outcome(db: PostgresConnection, client: QueryClient, logger: ErrorLogger) async throws {  // glue
    switch await withOutcome({ try await db.query("SELECT ...") }) {
    case .completed(let rows): try await client.send(rows)
    case .cancelled: return                               // nobody is listening: no log line, no error metric
    case .deadlineExceeded: try await client.send("ERR timeout")
    case .failed(let error): logger.error("query failed: \(error)")
    }
}  // glue
// end snippet

/// The reader's client connection for the search: keystrokes in, results out (queued, never waits).
protocol SearchClient: Sendable {
    var lines: AsyncThrowingStream<String, any Error> { get }
    func send(_ rows: [PostgresRow])
}

/// The reader's client connection for a query: rows or a line out.
protocol QueryClient: Sendable {
    func send(_ rows: [PostgresRow]) async throws
    func send(_ text: String) async throws
}

/// The reader's old lookup service, which ignores cancellation.
protocol LegacyIndex: Sendable {
    func lookup(_ term: String) async throws -> [String]
}

/// The reader's logger.
protocol ErrorLogger: Sendable {
    func error(_ message: String)
}
