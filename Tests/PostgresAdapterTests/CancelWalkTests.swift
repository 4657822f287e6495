import PostgresTestSupport
import ResourceKit
@_spi(Testing) import ResourceKitIO
import ResourceKitTesting
import TestSupport
import Testing

@testable import PostgresAdapter

/// The walk `pooled-query-deadline` that `Scripts/walks` counts (Docs/Architecture.md, "Two walks"): a request scope
/// with a deadline leases a pooled connection, a `pg_sleep` is sent and parked on, the scope's deadline passes, and the
/// walk ends when the caller has `DeadlineExceededError`, the cancel's outcome is in and the connection is idle in its
/// pool again (its session reset owed or done). The coverage window opens once the query's answer wait has parked,
/// before the deadline (nothing runs in between). A first round, outside the window, makes what a pool makes once
/// (its connection, its control connection); the second is the walk.
@Suite struct CancelWalkTests {
    @Test func pooledQueryDeadline() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let reactor = IOReactor(name: "t.walk.pool")
        defer { reactor.shutdown() }
        // The deadline is not carried to the server as `statement_timeout`: the server's timer, started when the
        // statement begins on a whole number of milliseconds, would race the client's own at the same instant and
        // stop the statement itself about half the time, and the walk would count the connection's cancel path or not
        // by chance. The walk is the client's deadline; what the carry adds is `CarriedDeadlineTests`'.
        let pool = try PostgresPool(
            conninfo: conninfo, maxConnections: 1, registry: ResourceRegistry(), reactor: reactor,
            session: PostgresSessionOptions(carriesDeadlineToServer: false))
        _ = try await pool.withConnection { try await $0.query("SELECT 1") }  // the pool's connection, made
        for (round, measured) in [false, true].enumerated() {
            try await until("nothing is parked", reactor.waitingDescriptorCounts()) { $0 == 0 }
            let counts = reactor.waitingDescriptorCounts()
            // Generous: the deadline must pass only after the window opened, on a busy machine too.
            let deadline = ContinuousClock.now + .seconds(2)
            let request = Task {
                try await withResourceScope("request", deadline: deadline) { _ in
                    try await pool.withConnection { try await $0.execute("SELECT pg_sleep(20)") }
                }
            }
            try await until("the query's answer wait parks", counts) { $0 > 0 }
            let expired = {
                await #expect(throws: DeadlineExceededError.self) { try await request.value }
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
                try await coverageWindow("pooled-query-deadline", expired)
            } else {
                try await expired()
            }
            #expect(ContinuousClock.now >= deadline, "the scope's deadline ended the query")
        }
        #expect(pool.cancelStatistics.snapshot.cancelRequests == 0, "the walk is the fast path's")
        await pool.shutdown()
    }
}
