import PostgresAdapter
import PostgresTestSupport
import ResourceKit
import ResourceKitTesting
import TestSupport
import Testing

/// Shared statements (`PostgresPool.execute`) in every production shape: a batch behind PgBouncer in transaction
/// mode, a balancer, TLS, passwords and a Unix socket; a statement of the batch cancelled stops on the real
/// backend, the others of the batch get their answers, and no later statement sees a stray 57014.
@Suite(.serialized) struct SharedStatementProductionTests {
    @Test(arguments: ProductionShapes.Setup.allCases)
    func aCancelledStatementOfABatchStopsAndSparesTheOthers(setup: ProductionShapes.Setup) async throws {
        let shapes = try await ProductionShapes.shared()
        let registry = ResourceRegistry()
        // Heavy (servers, helpers): one at a time with the other heavy tests.
        try await exclusively {
            try await withResourceScope("shared", registry: registry) { scope in
                let activity = try await ServerActivity(servers: shapes.servers(behind: setup), in: scope)
                let pool = try PostgresPool(conninfo: shapes.conninfo(setup), maxConnections: 1, registry: registry)
                for round in 0..<3 {
                    // The holder keeps the only connection while the batch queues behind it.
                    let held = try await HeldConnection.hold(theOnlyConnectionOf: pool)
                    let marker = statementMarker("shared")
                    let sleeper = Task { try await pool.execute("SELECT pg_sleep(30) /* \(marker) */") }
                    try await until("the sleep queued", pool.occupancyUpdates()) { $0.queuedStatements == 1 }
                    let others = (0..<12).map { index in
                        Task { try await pool.query("SELECT $1::int", [index]).first?.decode(Int.self, at: 0) }
                    }
                    try await until("all queued", pool.occupancyUpdates()) { $0.queuedStatements == 13 }
                    try await held.letGo()
                    _ = try await activity.waitUntilActive(marker)
                    let cancelled = ContinuousClock.now
                    sleeper.cancel()
                    await #expect(throws: CancellationError.self, "\(setup) round \(round)") { try await sleeper.value }
                    #expect(
                        ContinuousClock.now - cancelled < TimingBound.singleShot,
                        "\(setup): the task did not return promptly")
                    for (index, other) in others.enumerated() {
                        #expect(try await other.value == index, "\(setup) round \(round): a statement of the batch")
                    }
                    let stopped = try await activity.waitUntilStopped(marker, within: .seconds(5))
                    #expect(stopped != nil, "\(setup): the statement still runs on the server")
                    // No stray 57014 afterwards, shared or leased.
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for index in 0..<20 {
                            group.addTask {
                                let value = try await pool.query("SELECT $1::int", [index]).first?.decode(
                                    Int.self, at: 0)
                                #expect(value == index, "\(setup): not reusable")
                            }
                        }
                        try await group.waitForAll()
                    }
                    #expect(try await pool.withConnection { try await $0.query("SELECT 1").count } == 1)
                }
                print("shared statements, \(setup): green; cancel paths \(pool.cancelStatistics.snapshot)")
                await pool.shutdown()
            }
        }
        #expect(registry.liveCount == 0)
    }
}
