import PostgresAdapter
import PostgresTestSupport
import ResourceKit
import TestSupport
import Testing

/// Issue #11's matrix: every production shape × (single connection, pool with default settings) ×
/// (connect, query with `$1`, cancel → task returns, the query stopped on the *real* backend per
/// `pg_stat_activity`, the connection or pool reusable with no stray 57014).
@Suite(.serialized) struct ProductionMatrixTests {
    enum Mode: String, CaseIterable, CustomStringConvertible {
        case single, pool
        var description: String { rawValue }
    }

    @Test(arguments: ProductionShapes.Setup.allCases, Mode.allCases)
    func everyCellIsGreen(setup: ProductionShapes.Setup, mode: Mode) async throws {
        let shapes = try await ProductionShapes.shared()
        let conninfo = shapes.conninfo(setup)
        let registry = ResourceRegistry()
        // Heavy (servers, helpers, hundreds of cancels): one at a time with the other heavy tests.
        try await exclusively {
            try await withResourceScope("matrix", registry: registry) { scope in
                let activity = try await ServerActivity(servers: shapes.servers(behind: setup), in: scope)
                let pool =
                    mode == .pool ? try PostgresPool(conninfo: conninfo, maxConnections: 2, registry: registry) : nil
                let single = mode == .single ? try await PostgresConnection.connect(conninfo, in: scope) : nil
                @Sendable func run(_ sql: String, _ binds: [any PostgresEncodable] = []) async throws -> [PostgresRow] {
                    if let pool { return try await pool.withConnection { try await $0.query(sql, binds) } }
                    return try await single!.query(sql, binds)
                }
                // connect + query with $1
                #expect(
                    try await run("SELECT $1::int + 1", [41]).first?.decode(Int.self, at: 0) == 42, "\(setup) \(mode)")
                // cancel → task returns; stopped on the real backend
                for round in 0..<3 {
                    let marker = statementMarker("matrix")
                    let task = Task { try await run("SELECT pg_sleep(30) /* \(marker) */") }
                    _ = try await activity.waitUntilActive(marker)
                    let cancelled = ContinuousClock.now
                    task.cancel()
                    await #expect(throws: CancellationError.self, "\(setup) \(mode) round \(round)") {
                        try await task.value
                    }
                    #expect(
                        ContinuousClock.now - cancelled < TimingBound.singleShot,
                        "\(setup) \(mode): the task did not return promptly")
                    let stopped = try await activity.waitUntilStopped(marker, within: .seconds(5))
                    #expect(stopped != nil, "\(setup) \(mode): the query still runs on the server")
                    // reusable, no stray 57014
                    for _ in 0..<5 {
                        #expect(try await run("SELECT 1").count == 1, "\(setup) \(mode): not reusable")
                    }
                }
                let statistics = pool?.cancelStatistics.snapshot ?? single!.cancelStatistics.snapshot
                print("matrix \(setup) / \(mode): green; cancel paths \(statistics)")
                await pool?.shutdown()
            }
        }
        #expect(registry.liveCount == 0)
    }
}
