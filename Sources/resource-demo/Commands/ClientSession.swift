import PostgresAdapter
import ResourceKit
import ResourceKitIO
import SocketAdapter

/// One `serve` client: a reader task that frames lines and notices the disconnect, and an executor task
/// that runs the commands in order. When the reader sees EOF or a reset, the executor (and the query it
/// runs) is cancelled at once.
struct ClientSession: Sendable {
    let connection: SocketConnection
    let pool: any ConnectionSource

    static let maxLine = 4096
    /// Commands a client may send ahead of the answers; past this the connection is closed.
    static let maxPipelined = 64

    enum Item: Sendable {
        case line(String)
        case tooLong
        case tooManyPipelined
    }

    /// The client went away (EOF or reset) while the session ran.
    struct Disconnected: Error {}

    private enum Finished: Sendable { case reader, executor }

    func run() async {
        let (items, continuation) = AsyncStream<Item>.makeStream()
        let pending = Locked(0)
        do {
            try await withThrowingTaskGroup(of: Finished.self) { group in
                group.addTask {
                    defer { continuation.finish() }
                    try await readLines(into: continuation, pending: pending)
                    return .reader
                }
                group.addTask {
                    try await execute(items, pending: pending)
                    return .executor
                }
                while let finished = try await group.next() {
                    if finished == .executor { group.cancelAll() }
                }
            }
        } catch is Disconnected {
            // Cancelled the running command (if any) at once; nothing to answer.
        } catch {
            // Cancelled (server shutdown) or the socket failed while answering: the scope closes it.
        }
    }

    private func readLines(into continuation: AsyncStream<Item>.Continuation, pending: Locked<Int>) async throws {
        while true {
            let line: String?
            do {
                line = try await connection.readLine(maxLength: Self.maxLine)
            } catch let error as ByteStreamError where error.code == .lineTooLong {
                continuation.yield(.tooLong)
                return
            } catch is SocketError {
                throw Disconnected()
            }
            guard let line else { throw Disconnected() }
            if pending.withLock({
                $0 += 1
                return $0
            }) > Self.maxPipelined {
                continuation.yield(.tooManyPipelined)
                return
            }
            continuation.yield(.line(line))
        }
    }

    private func execute(_ items: AsyncStream<Item>, pending: Locked<Int>) async throws {
        for await item in items {
            switch item {
            case .tooLong:
                try await connection.write("ERR line too long\n")
                return
            case .tooManyPipelined:
                try await connection.write("ERR too many commands ahead of their answers\n")
                return
            case .line(let line):
                pending.withLock { $0 -= 1 }
                guard try await answer(line) else { return }
            }
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
        case (let command?, _) where ["PING", "QUIT", "SLEEP", "SERIES"].contains(command):
            try await connection.write("ERR wrong number of arguments for \(command)\n")
        default:
            try await connection.write("ERR unknown command (try PING, SLEEP <seconds>, SERIES <n>, QUIT)\n")
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
