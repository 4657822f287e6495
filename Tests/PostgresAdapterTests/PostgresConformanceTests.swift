import PostgresActivity
@_spi(Testing) import PostgresAdapter
import PostgresTestSupport
import ResourceKit
import ResourceKitTesting
import TestSupport
import Testing

/// The shipped Postgres adapter passes the conformance kit, every check: the blocking operation waits for an
/// advisory lock that a second connection holds (completing it releases the lock); the exchange is
/// `SELECT $1::text`; the external-work probe asks `pg_stat_activity` whether the backend is still active.
@Suite(.serialized) struct PostgresConformanceTests {
    @Test func postgresConnectionPassesTheKit() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("holder", registry: ResourceRegistry()) { scope in
            let holder = try await PostgresConnection.connect(conninfo, in: scope)
            let probe = PostgresActivityProbe(observer: try await PostgresConnection.connect(conninfo, in: scope))
            let keys = Locked<[ObjectIdentifier: Int]>([:])
            let base = Int.random(in: 1_000_000...9_000_000)
            let counter = Locked(0)
            let kit = AdapterConformance<PostgresConnection>(
                "PostgresConnection",
                make: { scope in
                    let key =
                        base
                        + counter.withLock {
                            $0 += 1
                            return $0
                        }
                    _ = try await holder.execute("SELECT pg_advisory_lock($1)", [key])
                    let connection = try await PostgresConnection.connect(conninfo, in: scope)
                    keys.withLock { $0[ObjectIdentifier(connection)] = key }
                    return connection
                },
                blockingOperation: { connection in
                    let key = keys.withLock { $0[ObjectIdentifier(connection)] } ?? 0
                    _ = try await connection.execute("SELECT pg_advisory_lock($1)", [key])
                },
                completeOperation: { connection in
                    let key = keys.withLock { $0[ObjectIdentifier(connection)] } ?? 0
                    _ = try await holder.execute("SELECT pg_advisory_unlock($1)", [key])
                },
                ownedDescriptors: { connection in connection.ownedDescriptors },
                exchange: { connection, token in
                    try await connection.query("SELECT $1::text", [token]).first?.decode(String.self, at: 0) ?? ""
                },
                externalWorkRunning: { connection in
                    guard let pid = connection.backendPID else { return false }
                    return try await probe.state(of: pid) == "active"
                }
            )
            let report = try await runConformance(kit)
            print(report)
            #expect(report.passed, "\(report)")
            #expect(report.checks.allSatisfy { !$0.skipped }, "every check ran:\n\(report)")
        }
    }
}
