import PostgresAdapter
import ResourceKit
import ResourceKitIO
import SocketAdapter

/// One `serve` client, run by `RequestSession`: its commands are read ahead and answered in order, each in a request
/// scope; when the client disconnects (end of input or a reset) while a command runs, that command (and the query it
/// runs) is cancelled at once.
struct ClientSession: Sendable {
    let connection: SocketConnection
    let pool: any ConnectionSource

    static let maxLine = 4096
    /// Commands a client may send ahead of the answers; past this the connection is closed.
    static let maxPipelined = 64

    func run() async {
        do {
            let ending = try await RequestSession.run(on: connection, maxAhead: Self.maxPipelined) {
                try await $0.readLine(maxLength: Self.maxLine)
            } handle: { line, _ in
                do {
                    return try await answer(line)
                } catch is CancellationError where GracefulShutdown.current?.graceHasExpired == true {
                    // The server's shutdown grace ended under this command: its query was cancelled.
                    try await connection.write("ERR server shutting down\n")
                    return false
                }
            }
            if ending == .tooManyAhead {
                try await connection.write("ERR too many commands ahead of their answers\n")
            }
        } catch let error as ByteStreamError where error.code == .lineTooLong {
            try? await connection.write("ERR line too long\n")
        } catch {
            // Cancelled (server shutdown) or the socket failed while answering: the scope closes it.
        }
    }

    /// Answers one command; returns false when the session should end.
    private func answer(_ line: String) async throws -> Bool {
        let words = line.split(separator: " ", omittingEmptySubsequences: true)
        switch (words.first.map { $0.uppercased() }, words.count) {
        case ("PING", 1):
            try await connection.write("PONG\n")
        case ("QUIT", 1):
            try await connection.write("BYE\n")
            return false
        case ("SLEEP", 2):
            guard let seconds = Double(words[1]), seconds.isFinite, (0...3600).contains(seconds) else {
                try await connection.write("ERR SLEEP takes seconds between 0 and 3600\n")
                return true
            }
            if try await query({ _ = try await $0.execute("SELECT pg_sleep($1)", [seconds]) }) {
                try await connection.write("OK\n")
            }
        case ("LOCK", 2):
            // A query that waits on a lock: what a disconnect or a shutdown most often has to stop in production.
            guard let key = Int64(words[1]) else {
                try await connection.write("ERR LOCK takes an advisory lock key (a 64-bit integer)\n")
                return true
            }
            if try await query({ _ = try await $0.execute("SELECT pg_advisory_xact_lock($1)", [key]) }) {
                try await connection.write("OK\n")
            }
        case ("SERIES", 2):
            guard let count = Int(words[1]), (0...100_000_000).contains(count) else {
                try await connection.write("ERR SERIES takes a count between 0 and 100000000\n")
                return true
            }
            if try await series(count) {
                try await connection.write("OK\n")
            }
        case (nil, _):
            try await connection.write("ERR empty line\n")
        case (let command?, _) where ["PING", "QUIT", "SLEEP", "LOCK", "SERIES"].contains(command):
            try await connection.write("ERR wrong number of arguments for \(command)\n")
        default:
            try await connection.write(
                "ERR unknown command (try PING, SLEEP <seconds>, LOCK <key>, SERIES <n>, QUIT)\n")
        }
        return true
    }

    /// Runs a query on a pooled connection; returns false after answering a server error with `ERR`.
    /// Cancellation (the client left, the server stops) propagates.
    private func query(_ body: (PostgresConnection) async throws -> Void) async throws -> Bool {
        do {
            try await pool.withConnection { try await body($0) }
            return true
        } catch let error as PostgresError {
            try await connection.write("ERR query failed (\(error.code))\n")
            return false
        }
    }

    private func series(_ count: Int) async throws -> Bool {
        try await query { postgres in
            var buffer = ""
            for try await row in try await postgres.stream("SELECT generate_series(1, $1::int8)", [count]) {
                buffer += (row[0] ?? "") + "\n"
                if buffer.utf8.count >= 32_768 {
                    try await connection.write(buffer)
                    buffer = ""
                }
            }
            try await connection.write(buffer)
        }
    }
}
