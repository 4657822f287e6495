import PostgresAdapter
import PostgresTestSupport
import ResourceKit
import ResourceKitObservation
import TestSupport
import Testing

/// A statement run under a deadline carries it to the server as its `statement_timeout`, in the same round trip,
/// and leaves the session's own setting as it was; without a deadline nothing is sent.
@Suite struct CarriedDeadlineTests {
    /// `SHOW statement_timeout` as the statement itself sees it, in milliseconds (`0`: none).
    static func timeoutSeen(by connection: PostgresConnection) async throws -> Int64 {
        let text = try await connection.query("SELECT setting FROM pg_settings WHERE name = 'statement_timeout'")
            .first?.decode(String.self, at: 0)
        return Int64(text ?? "") ?? -1
    }

    @Test func theDeadlineReachesTheStatementAndOnlyIt() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("carried", registry: ResourceRegistry()) { scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            #expect(try await Self.timeoutSeen(by: connection) == 0, "no deadline: nothing carried")
            let carried = try await withResourceOperation(
                boundTo: nil, deadline: .now + .seconds(10), onCancel: { _ in }
            ) {
                try await Self.timeoutSeen(by: connection)
            }
            #expect(carried > 9_000 && carried <= 10_000, "the statement saw \(carried) ms")
            #expect(try await Self.timeoutSeen(by: connection) == 0, "the session's own setting is back")
        }
    }

    @Test func aScopeDeadlineIsCarriedAndAnExplicitTransactionKeepsItsOwnSetting() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("carried.scope", deadline: .now + .seconds(20), registry: ResourceRegistry()) {
            scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            let carried = try await Self.timeoutSeen(by: connection)
            #expect(carried > 15_000 && carried <= 20_000, "the statement saw \(carried) ms")
            try await connection.execute("BEGIN")
            try await connection.execute("SET LOCAL statement_timeout = '7s'")
            #expect(try await Self.timeoutSeen(by: connection) == 7_000, "a shorter setting of one's own wins")
            try await connection.execute("SET LOCAL statement_timeout = '60s'")
            let inside = try await Self.timeoutSeen(by: connection)
            #expect(inside < 20_000, "the deadline wins over a longer setting: \(inside) ms")
            try await connection.execute("COMMIT")
        }
    }

    @Test func aShorterTimeoutOfTheUsersOwnStaysAPostgresError() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("carried.own", deadline: .now + .seconds(20), registry: ResourceRegistry()) {
            scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            try await connection.execute("SET statement_timeout = '200ms'")
            await #expect(throws: PostgresError.self) { try await connection.execute("SELECT pg_sleep(3)") }
            #expect(try await connection.query("SELECT 1").count == 1, "the connection stays usable")
        }
    }

    @Test func theServersTimeoutFromACarriedDeadlineIsDeadlineExceeded() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("carried.expiry", registry: ResourceRegistry()) { scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            await #expect(throws: DeadlineExceededError.self) {
                try await withResourceOperation(boundTo: nil, deadline: .now + .milliseconds(300), onCancel: { _ in }) {
                    try await connection.execute("SELECT pg_sleep(5)")
                }
            }
            #expect(try await connection.query("SELECT 1").count == 1, "the connection stays usable")
        }
    }

    /// A pooled connection carries its session reset in front of the statement and the deadline with it: the
    /// server's timeout is still the deadline's, whichever side stops the statement first.
    @Test func aPooledStatementCarryingItsResetAndDeadlineEndsInDeadlineExceeded() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let registry = ResourceRegistry()
        let pool = try PostgresPool(conninfo: conninfo, maxConnections: 1, registry: registry)
        for round in 1...8 {
            do {
                try await withResourceScope("pooled.carried", deadline: .now + .milliseconds(150)) { _ in
                    _ = try await pool.withConnection { try await $0.execute("SELECT pg_sleep(2)") }
                }
                Issue.record("round \(round): the statement outlived its deadline")
            } catch is DeadlineExceededError {
            } catch {
                Issue.record("round \(round): \(error)")
            }
        }
        #expect(try await pool.withConnection { try await $0.query("SELECT 1") }.count == 1)
        // The server's timeouts count as the deadlines they are (resourcekit_operations_total). On a quiet
        // machine the server stops most rounds itself (its timeout starts before the client's timer; one
        // fast-path cancel in 8 rounds when this was written), which is what this test is about.
        let operations = registry.snapshot().counters[PostgresConnection.kind.name]?.operations ?? [:]
        #expect(operations[.deadlineExceeded] == 8 && operations[.failed] == 0, "\(operations)")
        #expect(operations[.completed] == 1, "the SELECT 1")
        await pool.shutdown()
    }

    @Test func turnedOffNothingIsCarried() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("carried.off", deadline: .now + .seconds(20), registry: ResourceRegistry()) {
            scope in
            let connection = try await PostgresConnection.connect(
                conninfo, in: scope,
                configuration: .init(session: PostgresSessionOptions(carriesDeadlineToServer: false)))
            #expect(try await Self.timeoutSeen(by: connection) == 0)
        }
    }

    @Test func aVerifiedSessionWatchesForAVanishedClient() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("vanish", registry: ResourceRegistry()) { scope in
            let watched = try await PostgresConnection.connect(conninfo, in: scope)
            let setting = try await watched.query("SHOW client_connection_check_interval").first?.decode(
                String.self, at: 0)
            #expect(setting == "1s")
            let unwatched = try await PostgresConnection.connect(
                conninfo, in: scope, configuration: .init(session: PostgresSessionOptions(clientCheckInterval: nil)))
            #expect(
                try await unwatched.query("SHOW client_connection_check_interval").first?.decode(String.self, at: 0)
                    == "0")
        }
    }
}
