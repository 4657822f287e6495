import PostgresAdapter
import ResourceKit
import ResourceKitIO

/// What one request does: a line in, a line out, against a Postgres pool. The application code of the example; the
/// plumbing that serves it is ``TodoServer``.
///
/// Requests (one per line):
/// - `ADD <title>` → `OK <id>`;
/// - `LIST` → `OK <count>: <title> | <title> ...` (the latest 20);
/// - `SEARCH <text>` → `OK <count>` (titles containing the text);
/// - `SLEEP <seconds>` → `OK slept` (a query that takes that long on the server: for trying deadlines,
///   disconnects and shutdowns).
///
/// Each runs in a request scope with ``requestDeadline``: past it the query is stopped on the server and the answer
/// is `ERR deadline exceeded`. A request still running when a graceful shutdown's grace ends is cancelled and
/// answered `ERR server shutting down`. Bad input gets `ERR ...` and the connection stays usable.
public struct TodoService: Sendable {
    public let pool: PostgresPool
    public let requestDeadline: Duration

    public init(pool: PostgresPool, requestDeadline: Duration = .milliseconds(500)) {
        self.pool = pool
        self.requestDeadline = requestDeadline
    }

    /// Creates the table if it is missing.
    public func prepare() async throws {
        _ = try await pool.withConnection { postgres in
            try await postgres.execute(
                "CREATE TABLE IF NOT EXISTS todo (id bigserial PRIMARY KEY, title text NOT NULL)")
        }
    }

    /// The answer to `line`, without its line ending.
    ///
    /// Cancellation: the request's scope is a child of the caller's; cancelling the caller (the client went away)
    /// stops the query on the server and throws `CancellationError`.
    public func answer(_ line: String) async throws -> String {
        let (command, argument) = Self.split(line)
        do {
            return try await withResourceScope("request", deadline: .now + requestDeadline) { _ in
                switch command {
                case "ADD" where !argument.isEmpty:
                    let id = try await pool.query("INSERT INTO todo (title) VALUES ($1) RETURNING id", [argument])
                    return "OK \(try id[0].decode(Int.self, at: 0))"
                case "LIST":
                    let rows = try await pool.query("SELECT title FROM todo ORDER BY id DESC LIMIT 20")
                    return "OK \(rows.count): "
                        + (try rows.map { try $0.decode(String.self, at: 0) }).joined(separator: " | ")
                case "SEARCH":
                    let rows = try await pool.query(
                        "SELECT count(*) FROM todo WHERE strpos(title, $1) > 0", [argument])
                    return "OK \(try rows[0].decode(Int.self, at: 0))"
                case "SLEEP":
                    guard let seconds = Double(argument), seconds >= 0, seconds <= 3600 else {
                        return "ERR SLEEP takes a number of seconds (0 to 3600)"
                    }
                    // On a connection of its own: a long statement keeps off the shared path.
                    _ = try await pool.withConnection { try await $0.execute("SELECT pg_sleep($1)", [seconds]) }
                    return "OK slept"
                default:
                    return "ERR unknown request (ADD <title>, LIST, SEARCH <text>, SLEEP <seconds>)"
                }
            }
        } catch is DeadlineExceededError {
            return "ERR deadline exceeded"
        } catch is CancellationError where GracefulShutdown.current?.graceHasExpired == true {
            return "ERR server shutting down"
        } catch let error as PostgresError where error.code == .server {
            return "ERR \(error.message)"
        }
    }

    static func split(_ line: String) -> (command: String, argument: String) {
        let trimmed = line.hasSuffix("\r") ? String(line.dropLast()) : line
        guard let space = trimmed.firstIndex(of: " ") else { return (trimmed.uppercased(), "") }
        return (trimmed[..<space].uppercased(), String(trimmed[trimmed.index(after: space)...]))
    }
}
