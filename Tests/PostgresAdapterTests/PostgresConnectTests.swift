import Foundation
import Glibc
import PostgresActivity
import PostgresTestSupport
@_spi(Testing) import ResourceKit
import ResourceKitTesting
import TestSupport
import Testing

@_spi(Testing) @testable import PostgresAdapter

@Suite struct PostgresConnectTests {
    /// Scenario 13: connecting to a server that accepts and never answers is cancelled promptly; the socket
    /// is closed.
    @Test func cancelConnectToSilentServer() async throws {
        let silent = LoopbackPort(listen: 16)
        let port = silent.port
        let registry = ResourceRegistry()
        let task = Task {
            try await withResourceScope("connect", registry: registry) { scope in
                try await PostgresConnection.connect(
                    "host=127.0.0.1 port=\(port) user=x connect_timeout=60 sslmode=disable", in: scope)
            }
        }
        try await until("connection registered", registry.liveCountUpdates()) { $0 == 1 }
        let cancelled = ContinuousClock.now
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(ContinuousClock.now - cancelled < TimingBound.singleShot)
        #expect(registry.liveCount == 0)
    }

    @Test func badConninfoIsTypedAndHidesThePassword() async throws {
        let registry = ResourceRegistry()
        try await withResourceScope("bad", registry: registry) { scope in
            await #expect {
                try await PostgresConnection.connect("host=127.0.0.1 password=s3cret port", in: scope)
            } throws: { error in
                guard let error = error as? PostgresError else { return false }
                return error.code == .invalidConfiguration && !error.description.contains("s3cret")
            }
            await #expect {
                try await PostgresConnection.connect("postgres://u:s3cret@127.0.0.1:1/db?connect_timeout=2", in: scope)
            } throws: { error in
                guard let error = error as? PostgresError else { return false }
                return error.code == .connection && !error.description.contains("s3cret")
            }
        }
        #expect(registry.liveCount == 0)
        #expect(throws: PostgresError.self) { try PostgresPool(conninfo: "not a = valid = string", maxConnections: 1) }
    }

    @Test func urlsWork() async throws {
        let conninfo = try await TestDatabase.conninfo()
        guard let port = conninfo.split(separator: " ").first(where: { $0.hasPrefix("port=") })?.dropFirst(5) else {
            // RESOURCEKIT_TEST_POSTGRES may be a URL already: connect with it as is.
            try await withResourceScope("url", registry: ResourceRegistry()) { scope in
                _ = try await PostgresConnection.connect(conninfo, in: scope)
            }
            return
        }
        try await withResourceScope("url", registry: ResourceRegistry()) { scope in
            let connection = try await PostgresConnection.connect(
                "postgres://postgres@127.0.0.1:\(port)/postgres", in: scope)
            #expect((connection.backendPID ?? 0) > 0)
        }
    }

    /// A connection the server ended: libpq closes its socket when it reads the end, and from then on the
    /// connection claims no descriptor (nor shuts one down: a listener's cancel does that). The number it had may
    /// name a stranger's descriptor by then, opened anywhere in the process since.
    @Test func aLostConnectionHoldsNoDescriptorLibPQClosed() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("lost", registry: ResourceRegistry()) { scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            let pid = try #require(connection.backendPID)
            let socket = try #require(connection.ownedDescriptors.first)
            _ = try await observer.query("SELECT pg_terminate_backend($1)", [pid])
            let probe = PostgresActivityProbe(observer: observer, pollInterval: .milliseconds(5))
            #expect(try await probe.waitUntil(.gone(.pid(pid)), within: TimingBound.singleShot) != nil)
            await #expect(throws: PostgresError.self) { try await connection.execute("SELECT 1") }
            #expect(connection.isBroken)
            #expect(connection.ownedDescriptors.isEmpty, "still claims descriptor \(socket), which libpq closed")
        }
    }
}

@Suite struct PostgresQueryTests {
    @Test func bindsAndDecodesEveryType() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("types", registry: ResourceRegistry()) { scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            let id = UUID()
            let date = Date(timeIntervalSince1970: 1_700_000_000.123456)
            let row = try #require(
                try await connection.query(
                    """
                    SELECT $1::int8, $2::int4, $3::float8, $4::bool, $5::text, $6::bytea, $7::timestamptz, \
                    $8::uuid, $9::text AS nothing
                    """,
                    [Int(-42), Int32(7), 2.5, true, "héllo", PostgresBytes([0, 1, 255]), date, id, String?.none]
                ).first)
            #expect(try row.decode(Int.self, at: 0) == -42)
            #expect(try row.decode(Int32.self, at: 1) == 7)
            #expect(try row.decode(Double.self, at: 2) == 2.5)
            #expect(try row.decode(Bool.self, at: 3))
            #expect(try row.decode(String.self, at: 4) == "héllo")
            #expect(try row.decode(PostgresBytes.self, at: 5) == PostgresBytes([0, 1, 255]))
            let decoded = try row.decode(Date.self, at: 6)
            #expect(abs(decoded.timeIntervalSince1970 - date.timeIntervalSince1970) < 0.000_01)
            #expect(try row.decode(UUID.self, at: 7) == id)
            #expect(try row.decode(String?.self, named: "nothing") == nil)
            #expect(throws: PostgresError.self) { try row.decode(String.self, named: "nothing") }
            #expect(throws: PostgresError.self) { try row.decode(Int.self, at: 99) }
        }
    }

    @Test func affectedRowsAndTransactions() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("tx", registry: ResourceRegistry()) { scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            try await connection.execute("CREATE TEMP TABLE t (n int)")
            let inserted = try await connection.execute("INSERT INTO t SELECT generate_series(1, 3)")
            #expect(inserted.affectedRows == 3)
            struct Boom: Error {}
            await #expect(throws: Boom.self) {
                try await connection.withTransaction { tx in
                    try await tx.execute("INSERT INTO t VALUES (4)")
                    throw Boom()
                }
            }
            _ = try await connection.withTransaction { tx in try await tx.execute("INSERT INTO t VALUES (5)") }
            let count = try await connection.query("SELECT count(*) FROM t")[0].decode(Int.self, at: 0)
            #expect(count == 4)
        }
    }

    @Test func badSQLAndWrongParameterCountAreTypedErrors() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("bad", registry: ResourceRegistry()) { scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            await #expect { try await connection.execute("SELEC 1") } throws: { error in
                guard let error = error as? PostgresError else { return false }
                return error.code == .server && error.sqlState == "42601" && error.position == 1
            }
            await #expect { try await connection.execute("SELECT $1::int + $2::int", [1]) } throws: {
                ($0 as? PostgresError)?.code == .server
            }
            await #expect { try await connection.execute("SELECT 'x'::int") } throws: {
                ($0 as? PostgresError)?.sqlState == "22P02"
            }
            #expect(try await connection.query("SELECT 1").count == 1)
        }
    }

    /// Scenario 20: the server killed mid-query: a typed connection error within 1 s.
    @Test func serverKilledMidQuery() async throws {
        let server = try await TestDatabase.privateCluster()
        do {
            try await withResourceScope("kill", registry: ResourceRegistry()) { scope in
                let connection = try await PostgresConnection.connect(server.conninfo, in: scope)
                let observer = try await PostgresConnection.connect(server.conninfo, in: scope)
                let task = Task { try await connection.execute("SELECT pg_sleep(30)") }
                try await TestDatabase.waitUntilActive(try #require(connection.backendPID), observer: observer)
                let killed = ContinuousClock.now
                try await server.killImmediately()
                await #expect { try await task.value } throws: { ($0 as? PostgresError)?.code == .connection }
                #expect(
                    ContinuousClock.now - killed < .seconds(1) + TimingBound.singleShot,
                    "includes pg_ctl's own time; a missed death would wait for the 30 s sleep")
                #expect(connection.isBroken)
            }
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }
}
