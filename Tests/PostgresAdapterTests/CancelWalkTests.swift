import PostgresTestSupport
import ResourceKit
@_spi(Testing) import ResourceKitIO
import ResourceKitTesting
import TestSupport
import Testing

@testable import PostgresAdapter

/// The walk of a cancelled pooled query, the one `Scripts/walks` counts (Docs/Architecture.md, "Two walks"): a
/// lease, a `pg_sleep` sent and parked on, the task cancelled, `CancellationError`, the cancel delivered (the fast
/// path, the pool's default) and the connection cleaned and idle again. A first round, outside the coverage window,
/// makes what a pool makes once (its connection, its control connection); the second is the walk.
@Suite struct CancelWalkTests {
    @Test func aCancelledPooledQuery() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let reactor = IOReactor(name: "t.walk.pool")
        defer { reactor.shutdown() }
        let pool = try PostgresPool(
            conninfo: conninfo, maxConnections: 1, registry: ResourceRegistry(), reactor: reactor)
        _ = try await pool.withConnection { try await $0.query("SELECT 1") }  // the pool's connection, made
        for (round, measured) in [false, true].enumerated() {
            try await until("nothing is parked", reactor.waitingDescriptorCounts()) { $0 == 0 }
            let counts = reactor.waitingDescriptorCounts()
            let cancelledQuery = {
                let query = Task { try await pool.withConnection { try await $0.execute("SELECT pg_sleep(20)") } }
                try await until("the query's answer wait parks", counts) { $0 > 0 }
                query.cancel()
                await #expect(throws: CancellationError.self) { try await query.value }
                // Subscribed now, so that a value from before the query cannot answer. A cancel that reached the
                // backend before it began the statement is ignored by the server, and the connection sends it again
                // (Docs/Architecture.md, "The Postgres adapter"): at least one outcome per round, maybe two.
                try await until("the cancel's outcome", pool.cancelStatistics.updates()) {
                    $0.fastPath + $0.cancelRequests >= round + 1
                }
                try await until("the connection is idle again", pool.occupancyUpdates()) {
                    $0.idle == 1 && $0.open == 1
                }
            }
            if measured {
                try await coverageWindow("pooled-query", cancelledQuery)
            } else {
                try await cancelledQuery()
            }
        }
        #expect(pool.cancelStatistics.snapshot.cancelRequests == 0, "the walk is the fast path's")
        await pool.shutdown()
    }
}
