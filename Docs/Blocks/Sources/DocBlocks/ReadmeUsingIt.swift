// README, "Using it": the first block, application code. Glue: the function around the statements.
// snippet: readme-using-it
import PostgresAdapter
import ResourceKit

func usingIt(pool: PostgresPool, owner: String) async throws {  // glue
    // One request: what it runs through ResourceKit (this query on a pooled connection) lives as long as the scope.
    let titles = try await withResourceScope("request", deadline: .now + .seconds(2)) { _ in
        try await pool.query("SELECT title FROM todo WHERE owner = $1", [owner])
    }   // task cancelled or deadline passed => the query is cancelled on the server and this throws at once
    _ = titles  // glue
}  // glue
// end snippet

/// The reader's own resource.
final class MyResource: ManagedResource {
    static let kind = ResourceKind(name: "example.upstream", closeTimeout: .seconds(2))

    func read(boundTo handle: ResourceHandle) async throws {
        try handle.checkCancellation()
    }

    func cancel() {}
    func close() async throws {}
}
