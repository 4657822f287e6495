import Foundation
import PostgresAdapter
import PostgresActivity
import PostgresTestSupport
import ResourceKit
import ResourceKitPatterns
import TestSupport
import Testing

/// The latest-wins pattern against a real server: executions are counted on the server.
@Suite struct LatestTaskPostgresTests {
    /// 20 ids in 200 ms with a 300 ms debounce reach Postgres once: a sequence the query advances moves by 1.
    @Test func debouncedBurstReachesPostgresOnce() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let sequence = "rk_latest_\(UInt32.random(in: 0...UInt32.max))"
        try await withResourceScope("connection", registry: ResourceRegistry()) { scope in
            let admin = try await PostgresConnection.connect(conninfo, in: scope)
            _ = try await admin.execute("CREATE SEQUENCE \(sequence)")
            let pool = try PostgresPool(conninfo: conninfo, maxConnections: 2)
            let latest = try await LatestTask<String, Int>.start(in: scope, "search", debounce: .milliseconds(300)) {
                term, _ in
                try await pool.withConnection { connection in
                    let rows = try await connection.query("SELECT nextval('\(sequence)'), length($1)", [term])
                    return try rows[0].decode(Int.self, at: 0)
                }
            }
            let updates = latest.output.updates()
            try await exclusively {
                for length in 1...20 {
                    latest.update(id: String(repeating: "a", count: length))
                    try await Task.sleep(for: .milliseconds(10))
                }
            }
            var iterator = updates.makeAsyncIterator()
            #expect(await iterator.next()?.value == 1, "the first and only execution")
            let rows = try await admin.query("SELECT last_value FROM \(sequence)")
            #expect(try rows[0].decode(Int.self, at: 0) == 1)
            #expect(latest.stats.debouncedAway == 19)
            _ = try await admin.execute("DROP SEQUENCE \(sequence)")
            await latest.close()
            await pool.shutdown()
        }
    }

    /// Without debounce, each new id cancels the previous query on the server: only the latest is active.
    @Test func supersededQueriesAreCancelledOnTheServer() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let marker = "rk-latest-\(UUID().uuidString)"
        try await withResourceScope("connection", registry: ResourceRegistry()) { scope in
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            let latest = try await LatestTask<Int, Int>.start(in: scope, "slow") { id, runScope in
                let connection = try await PostgresConnection.connect(conninfo, in: runScope)
                _ = try await connection.execute("SELECT pg_sleep(30) /* \(marker) \(id) */")
                return id
            }
            func activeCount(_ id: Int? = nil) async throws -> Int {
                try await PostgresActivityProbe(observer: observer).backends(
                    .running(marker + (id.map { " \($0) " } ?? ""))
                ).count
            }
            for id in 1...5 {
                latest.update(id: id)
                // Let each query reach the server before the next id supersedes it.
                let start = ContinuousClock.now
                while try await activeCount(id) < 1, ContinuousClock.now - start < .seconds(10) {}
            }
            let start = ContinuousClock.now
            while try await activeCount() > 1, ContinuousClock.now - start < TimingBound.singleShot {}
            #expect(try await activeCount() == 1, "only the latest query runs on the server")
            #expect(try await activeCount(5) == 1)
            await latest.close()
            let closed = ContinuousClock.now
            while try await activeCount() > 0, ContinuousClock.now - closed < TimingBound.singleShot {}
            #expect(try await activeCount() == 0)
            #expect(latest.stats.cancelled == 5)
        }
    }
}
