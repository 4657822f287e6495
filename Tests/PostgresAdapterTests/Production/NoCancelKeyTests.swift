import PostgresAdapter
import PostgresTestSupport
import ResourceKit
import TestSupport
import Testing

/// Scenario 19: a proxy that sends no BackendKeyData. No cancel request can reach the session, so a
/// cancel shuts the connection down (broken, never reused) and the server, asked at connect to check for a
/// vanished client every 250 ms, stops the query.
@Suite struct NoCancelKeyTests {
    @Test func withoutACancelKeyACancelStillStopsTheServerQuery() async throws {
        let server = try await TestDatabase.privateCluster()
        let proxy = try await KeylessProxy.start(upstream: server.port)
        let conninfo =
            "host=127.0.0.1 port=\(proxy.port) user=postgres dbname=postgres sslmode=disable connect_timeout=10"
        let registry = ResourceRegistry()
        do {
            try await withResourceScope("keyless", registry: registry) { scope in
                let activity = try await ServerActivity(servers: [server.conninfo], in: scope)
                let connection = try await PostgresConnection.connect(conninfo, in: scope)
                #expect(connection.cancelKeyPID == 0)
                #expect(connection.backendPID == nil)
                let marker = statementMarker("keyless")
                let task = Task { try await connection.execute("SELECT pg_sleep(30) /* \(marker) */") }
                _ = try await activity.waitUntilActive(marker)
                let cancelled = ContinuousClock.now
                task.cancel()
                await #expect(throws: CancellationError.self) { try await task.value }
                #expect(ContinuousClock.now - cancelled < TimingBound.singleShot)
                #expect(connection.isBroken, "a connection that could not be cancelled must not be reused")
                let stopped = try await activity.waitUntilStopped(marker, within: .seconds(5))
                print(
                    """
                    no BackendKeyData: the query stopped on the server \(stopped.map { "\($0)" } ?? "never") after \
                    the cancel
                    """
                )
                #expect(stopped != nil, "the server query ran on")

                // A pool replaces such a connection: the next query succeeds.
                let pool = try PostgresPool(conninfo: conninfo, maxConnections: 1, registry: registry)
                let next = statementMarker("keyless-pool")
                let pooled = Task {
                    try await pool.withConnection { try await $0.execute("SELECT pg_sleep(30) /* \(next) */") }
                }
                _ = try await activity.waitUntilActive(next)
                pooled.cancel()
                await #expect(throws: CancellationError.self) { try await pooled.value }
                #expect(try await pool.withConnection { try await $0.query("SELECT 1").count } == 1)
                await pool.shutdown()
            }
        } catch {
            await proxy.stop()
            await server.stop()
            throw error
        }
        await proxy.stop()
        await server.stop()
        #expect(registry.liveCount == 0)
    }
}
