import PostgresAdapter
import PostgresTestSupport
import ResourceKit
import TestSupport
import Testing

/// Pipelines against the real server.
@Suite struct PipelineTests {
    @Test func resultsComeBackInOrder() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("pipeline", registry: ResourceRegistry()) { scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            let results = try await connection.pipeline((1...100).map { PostgresStatement("SELECT $1::int", [$0]) })
            let values = try results.map { try $0.get().rows.first?.decode(Int.self, at: 0) }
            #expect(values == (1...100).map { $0 })
            #expect(try await connection.query("SELECT 1").count == 1)
        }
    }

    /// An error in the middle: that statement fails with the server's error, the rest are skipped
    /// (`pipelineAborted`), and the connection is usable.
    @Test func anErrorInTheMiddleAbortsTheRest() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("pipeline", registry: ResourceRegistry()) { scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            let results = try await connection.pipeline([
                PostgresStatement("SELECT 1"), PostgresStatement("SELECT 1/0"), PostgresStatement("SELECT 3"),
            ])
            #expect(results.count == 3)
            #expect((try? results[0].get().rows.first?.decode(Int.self, at: 0)) == 1)
            guard case .failure(let division) = results[1], case .failure(let skipped) = results[2] else {
                Issue.record("expected failures, got \(results)")
                return
            }
            #expect(division.sqlState == "22012")
            #expect(skipped.code == .pipelineAborted)
            #expect(try await connection.query("SELECT 4").first?.decode(Int.self, at: 0) == 4)
        }
    }

    /// Runs of the same statement are parsed once; mixed batches keep their order; a statement the server
    /// cannot parse reports the server's own error, also inside such a run.
    @Test func repeatedStatementsAndAParseErrorInARun() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("pipeline", registry: ResourceRegistry()) { scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            let mixed = try await connection.pipeline([
                PostgresStatement("SELECT $1::int", [1]), PostgresStatement("SELECT $1::int", [2]),
                PostgresStatement("SELECT $1::text", ["three"]), PostgresStatement("SELECT $1::int", [4]),
                PostgresStatement("SELECT $1::int", [5]), PostgresStatement("SELECT $1::int", [6]),
            ])
            let values = try mixed.map { try $0.get().rows.first?.values.first ?? nil }
            #expect(values == ["1", "2", "three", "4", "5", "6"])
            let broken = try await connection.pipeline([
                PostgresStatement("SELEKT $1::int", [1]), PostgresStatement("SELEKT $1::int", [2]),
            ])
            guard case .failure(let syntax) = broken[0], case .failure(let skipped) = broken[1] else {
                Issue.record("expected failures, got \(broken)")
                return
            }
            #expect(syntax.sqlState == "42601")
            #expect(skipped.code == .pipelineAborted)
            #expect(try await connection.query("SELECT 1").count == 1)
        }
    }

    @Test func cancelledMidWayStopsTheServerAndTheConnectionIsReusable() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("pipeline", registry: ResourceRegistry()) { scope in
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            let pid = try #require(connection.backendPID)
            let task = Task {
                try await connection.pipeline([
                    PostgresStatement("SELECT 1"), PostgresStatement("SELECT pg_sleep(30)"),
                    PostgresStatement("SELECT 3"),
                ])
            }
            try await TestDatabase.waitUntilActive(pid, observer: observer)
            task.cancel()
            await #expect(throws: CancellationError.self) { try await task.value }
            #expect(try await TestDatabase.waitUntilNotActive(pid, observer: observer) != nil)
            let next = try await connection.pipeline([PostgresStatement("SELECT 7")])
            #expect((try? next[0].get().rows.first?.decode(Int.self, at: 0)) == 7)
        }
    }

    /// 1,000 pipelines cancelled at random points, each followed by another batch: no stray 57014.
    @Test func lateCancelsNeverReachTheNextBatch() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("pipeline", registry: ResourceRegistry()) { scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            var (completed, cancelled, stray, other) = (0, 0, 0, 0)
            for _ in 0..<1_000 {
                let task = Task {
                    try await connection.pipeline([
                        PostgresStatement("SELECT pg_sleep(0.001)"), PostgresStatement("SELECT 1"),
                        PostgresStatement("SELECT 2"),
                    ])
                }
                try await Task.sleep(for: .microseconds(Int.random(in: 0...3_000)))
                task.cancel()
                switch await task.result {
                case .success: completed += 1
                case .failure(let error) where error is CancellationError: cancelled += 1
                case .failure: other += 1
                }
                for result in try await connection.pipeline([
                    PostgresStatement("SELECT 1"), PostgresStatement("SELECT 2"),
                ]) {
                    if case .failure(let error) = result {
                        if error.isQueryCanceled { stray += 1 } else { other += 1 }
                    }
                }
            }
            print(
                """
                pipeline late-cancel stress: \(completed) completed, \(cancelled) cancelled, \(stray) stray 57014, \
                \(other) other errors
                """
            )
            #expect(stray == 0)
            #expect(other == 0)
            #expect(cancelled > 0)
        }
    }
}
