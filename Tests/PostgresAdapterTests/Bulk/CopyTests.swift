import PostgresAdapter
import PostgresTestSupport
import ResourceKit
import ResourceKitTesting
import TestSupport
import Testing

/// COPY both ways against the real server: streamed, cancellable, nothing committed on cancel or bad data.
@Suite struct CopyTests {
    /// Rows `from...to` of a one-integer-column COPY text input, in chunks of `perChunk` rows.
    struct Rows: AsyncSequence, Sendable {
        typealias Element = [UInt8]
        let from: Int
        let to: Int
        let perChunk: Int
        /// Counts chunks handed out (to cancel mid-way).
        let produced: ObservedValue<Int>
        /// After this many chunks the source waits (a slow producer, like an upload) until cancelled.
        var stallAfter: Int? = nil

        struct AsyncIterator: AsyncIteratorProtocol {
            var next: Int
            let to: Int
            let perChunk: Int
            let produced: ObservedValue<Int>
            let stallAfter: Int?
            mutating func next() async throws -> [UInt8]? {
                guard next <= to else { return nil }
                if let stallAfter, produced.value >= stallAfter {
                    try await OneShotEvent().wait()  // never set: only cancellation ends it
                }
                let last = Swift.min(next + perChunk - 1, to)
                var text = ""
                for value in next...last { text += "\(value)\n" }
                next = last + 1
                produced.update { $0 += 1 }
                return Array(text.utf8)
            }
        }

        func makeAsyncIterator() -> AsyncIterator {
            AsyncIterator(next: from, to: to, perChunk: perChunk, produced: produced, stallAfter: stallAfter)
        }
    }

    static func table(_ connection: PostgresConnection) async throws -> String {
        let name = "rk_copy_\(UInt32.random(in: 0...UInt32.max))"
        try await connection.execute("CREATE TABLE \(name) (a int)")
        return name
    }

    @Test func copyOutStreamsEveryRow() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("copy", registry: ResourceRegistry()) { scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            var text = ""
            var chunks = 0
            for try await chunk in try await connection.copyOut("COPY (SELECT generate_series(1, 100000)) TO STDOUT") {
                #expect(chunk.last == UInt8(ascii: "\n"), "a chunk holds whole rows")
                #expect(chunk.count <= PostgresCopyOutStream.chunkSize + 16)
                text += String(decoding: chunk, as: UTF8.self)
                chunks += 1
            }
            #expect(text == (1...100_000).map { "\($0)\n" }.joined())
            #expect(chunks > 1 && chunks < 100_000, "rows are gathered into chunks: \(chunks)")
            await #expect { try await connection.copyOut("SELECT 1") } throws: {
                ($0 as? PostgresError)?.code == .invalidQuery
            }
            #expect(try await connection.query("SELECT 1").count == 1)
        }
    }

    /// COPY OUT of 1M rows cancelled mid-way: the server stops (idle in pg_stat_activity) and the connection
    /// is reusable.
    @Test func copyOutCancelledMidWayStopsTheServer() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("copy", registry: ResourceRegistry()) { scope in
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            let connection = try await PostgresConnection.connect(
                conninfo, in: scope, configuration: .init(cancelTimeout: .seconds(30)))
            let pid = try #require(connection.backendPID)
            let seen = ObservedValue(0)
            let task = Task {
                for try await _ in try await connection.copyOut("COPY (SELECT generate_series(1, 1000000)) TO STDOUT") {
                    let count = seen.update { count -> Int in
                        count += 1
                        return count
                    }
                    if count == 3 {
                        // A consumer busy elsewhere until it is cancelled: its next `next()` then meets the
                        // cancellation (whatever the machine's load, the cancel lands mid-COPY).
                        do { try await OneShotEvent().wait() } catch {}
                    }
                }
            }
            try await until("chunks arrive", seen.values()) { $0 >= 3 }
            let cancelled = ContinuousClock.now
            task.cancel()
            await #expect(throws: CancellationError.self) { try await task.value }
            #expect(ContinuousClock.now - cancelled < TimingBound.singleShot)
            #expect(seen.value == 3, "no chunk is taken after the cancel")
            #expect(try await connection.query("SELECT 2").first?.decode(Int.self, at: 0) == 2)
            #expect(try await TestDatabase.backendState(pid, observer: observer) == "idle")
        }
    }

    @Test func copyInLoadsAndCountsRows() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("copy", registry: ResourceRegistry()) { scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            let table = try await Self.table(connection)
            let loaded = try await connection.copyIn(
                "COPY \(table) FROM STDIN",
                from: Rows(from: 1, to: 100_000, perChunk: 5_000, produced: ObservedValue(0)))
            #expect(loaded == 100_000)
            #expect(
                try await connection.query("SELECT count(*), sum(a) FROM \(table)").first.map {
                    try ($0.decode(Int.self, at: 0), $0.decode(Int.self, at: 1))
                }! == (100_000, 5_000_050_000))
            try await connection.execute("DROP TABLE \(table)")
        }
    }

    /// COPY IN of 1M rows cancelled mid-way: nothing is committed, the connection is reusable.
    @Test func copyInCancelledMidWayCommitsNothing() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("copy", registry: ResourceRegistry()) { scope in
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            let connection = try await PostgresConnection.connect(
                conninfo, in: scope, configuration: .init(cancelTimeout: .seconds(30)))
            let pid = try #require(connection.backendPID)
            let table = try await Self.table(connection)
            let produced = ObservedValue(0)
            let task = Task {
                try await connection.copyIn(
                    "COPY \(table) FROM STDIN",
                    from: Rows(from: 1, to: 1_000_000, perChunk: 1_000, produced: produced, stallAfter: 500)
                )
            }
            try await until("half of the rows were sent", produced.values()) { $0 >= 500 }
            let cancelled = ContinuousClock.now
            task.cancel()
            await #expect(throws: CancellationError.self) { try await task.value }
            #expect(ContinuousClock.now - cancelled < TimingBound.singleShot)
            #expect(produced.value == 500)
            // The server aborted the load at once (CopyFail and a cancel went out as the task left), before the
            // connection's next operation: its backend is no longer active, seen from another connection.
            #expect(try await TestDatabase.waitUntilNotActive(pid, observer: observer) != nil)
            #expect(try await connection.query("SELECT count(*) FROM \(table)").first?.decode(Int.self, at: 0) == 0)
            try await connection.execute("DROP TABLE \(table)")
        }
    }

    /// A bad row: the server's error names its line; nothing partial is committed; the connection works.
    @Test func aBadRowNamesItsLineAndCommitsNothing() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("copy", registry: ResourceRegistry()) { scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            let table = try await Self.table(connection)
            let data = [Array("1\n2\n".utf8), Array("x\n4\n".utf8)]
            let source = AsyncStream<[UInt8]> { continuation in
                for chunk in data { continuation.yield(chunk) }
                continuation.finish()
            }
            await #expect {
                try await connection.copyIn("COPY \(table) FROM STDIN", from: source)
            } throws: { error in
                guard let error = error as? PostgresError else { return false }
                return error.code == .server && error.sqlState == "22P02" && error.copyLine == 3
            }
            #expect(try await connection.query("SELECT count(*) FROM \(table)").first?.decode(Int.self, at: 0) == 0)
            try await connection.execute("DROP TABLE \(table)")
        }
    }
}
