import Foundation
import PostgresTestSupport
import ResourceKit
import ResourceKitTesting
import TestSupport
import Testing

@testable import PostgresAdapter

/// Whatever SQL the previous user of a pooled connection ran, the next user sees the session a fresh connection
/// has, with the connection's own settings kept (Docs/Architecture.md, "Clean sessions"): through
/// `withConnection`, through shared statements alone on a connection and batch after batch, directly and behind
/// PgBouncer in transaction mode.
@Suite(.serialized) struct SessionResetTests {
    /// What a session carries, one column each, as text: settings, the role, LISTENs, prepared statements,
    /// cursors, session advisory locks, temporary tables, the connection's own check interval, then the backend.
    static let probe = """
        SELECT current_setting('search_path'), current_setting('work_mem'), current_setting('statement_timeout'), \
        current_setting('client_connection_check_interval'), (current_user = session_user)::text, \
        (SELECT count(*) FROM pg_listening_channels())::text, (SELECT count(*) FROM pg_prepared_statements)::text, \
        (SELECT count(*) FROM pg_cursors)::text, \
        (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid())::text, \
        (to_regclass('pg_temp.rk_reset_a') IS NULL AND to_regclass('pg_temp.rk_reset_b') IS NULL)::text, \
        pg_backend_pid()::text
        """
    static let probeColumns = 11

    /// Session advisory locks this process takes: its own keys, so that a session some failed test left open
    /// cannot make another test wait.
    static let lockKey = Int.random(in: 1...1_000_000_000)

    /// Everything a lessee can leave in its session (run through `withConnection`).
    static let leftByALessee = [
        "SET search_path = pg_catalog", "SELECT set_config('work_mem', '4321kB', false)",
        "SET statement_timeout = 1234",
        "SET client_connection_check_interval = 0", "LISTEN rk_reset_channel", "PREPARE rk_reset_prepared AS SELECT 1",
        "DECLARE rk_reset_cursor CURSOR WITH HOLD FOR SELECT 1", "SELECT pg_advisory_lock(\(lockKey))",
        "CREATE TEMP TABLE rk_reset_a (n int)", "SET ROLE pg_monitor",
    ]

    /// What the shared path accepts (the keyword check refuses `SET`, `LISTEN`, `PREPARE`, `DECLARE`) and still
    /// changes the session.
    static let leftByASharedStatement = [
        "SELECT set_config('search_path', 'pg_catalog', false)", "SELECT pg_advisory_lock(\(lockKey + 1))",
        "CREATE TABLE pg_temp.rk_reset_a (n int)", "SELECT 1 AS n INTO TEMP rk_reset_b",
        "DO $$BEGIN PERFORM set_config('work_mem', '2MB', false); END$$",
        "SELECT set_config('role', 'pg_monitor', false)",
    ]

    /// A pool of one connection, shut down however `body` ends (a session left open would hold its locks).
    static func withPool<T>(
        _ conninfo: String, _ registry: ResourceRegistry, pipelineDepth: Int = 8,
        session: PostgresSessionOptions = PostgresSessionOptions(), _ body: (PostgresPool) async throws -> T
    ) async throws -> T {
        let pool = try PostgresPool(
            conninfo: conninfo, maxConnections: 1, registry: registry, cancelFastPath: false, session: session,
            pipelineDepth: pipelineDepth)
        do {
            let value = try await body(pool)
            await pool.shutdown()
            return value
        } catch {
            await pool.shutdown()
            throw error
        }
    }

    static func session(_ rows: [PostgresRow]) throws -> [String] {
        try (0..<probeColumns).map { try rows[0].decode(String?.self, at: $0) ?? "NULL" }
    }

    /// Where the pool connects: the test cluster directly (with a setting in its conninfo's `options`, which the
    /// reset must keep), or PgBouncer in transaction mode with one server connection (so that every
    /// transaction lands on the session the previous user changed).
    enum Route: String, CaseIterable, CustomStringConvertible {
        case direct, pgbouncer
        var description: String { rawValue }
    }

    static func withRoute<T>(_ route: Route, _ body: (String) async throws -> T) async throws -> T {
        let conninfo = try await TestDatabase.conninfo()
        switch route {
        case .direct: return try await body(conninfo + " options='-c statement_timeout=98765'")
        case .pgbouncer: return try await PgBouncerProcess.inFront(of: conninfo, poolSize: 1, body)
        }
    }

    @Test(arguments: Route.allCases)
    func theNextLesseeSeesAFreshSession(route: Route) async throws {
        let registry = ResourceRegistry()
        try await Self.withRoute(route) { conninfo in
            try await Self.withPool(conninfo, registry) { pool in
                let fresh = try await pool.withConnection { try Self.session(try await $0.query(Self.probe)) }
                #expect(route == .pgbouncer || fresh[2] == "98765ms", "the conninfo's options apply: \(fresh)")
                #expect(route == .pgbouncer || fresh[3] == "1s", "the pool's own check interval applies: \(fresh)")
                try await pool.withConnection { connection in
                    for statement in Self.leftByALessee { try await connection.execute(statement) }
                    let changed = try Self.session(try await connection.query(Self.probe))
                    #expect(changed.prefix(Self.probeColumns - 1) != fresh.prefix(Self.probeColumns - 1))
                }
                let next = try await pool.withConnection { try Self.session(try await $0.query(Self.probe)) }
                #expect(next == fresh, "fresh \(fresh), the next lessee saw \(next)")
            }
        }
        #expect(registry.liveCount == 0)
    }

    /// How the next lessee's first operation reads the session: a plain statement (carries the reset in front of
    /// it), one under a deadline (carries the reset in front of its carried deadline), a stream and a pipeline
    /// (neither carries it: the cleanup runs it on a round trip of its own first).
    enum FirstOperation: String, CaseIterable, CustomStringConvertible {
        case statement, statementUnderDeadline, stream, pipeline
        var description: String { rawValue }

        func searchPath(on connection: PostgresConnection) async throws -> String {
            let sql = "SELECT current_setting('search_path')"
            switch self {
            case .statement:
                return try await connection.query(sql)[0].decode(String.self, at: 0)
            case .statementUnderDeadline:
                return try await withResourceOperation(
                    boundTo: nil, deadline: .now + .seconds(30), onCancel: { _ in }
                ) { try await connection.query(sql)[0].decode(String.self, at: 0) }
            case .stream:
                var value = ""
                for try await row in try await connection.stream(sql) { value = try row.decode(String.self, at: 0) }
                return value
            case .pipeline:
                return try await connection.pipeline([PostgresStatement(sql)])[0].get().rows[0].decode(
                    String.self, at: 0)
            }
        }
    }

    @Test(arguments: FirstOperation.allCases)
    func everyKindOfFirstOperationSeesAFreshSession(first: FirstOperation) async throws {
        let registry = ResourceRegistry()
        let conninfo = try await TestDatabase.conninfo()
        try await Self.withPool(conninfo, registry) { pool in
            for _ in 0..<3 {
                _ = try await pool.withConnection { try await $0.execute("SET search_path = pg_catalog") }
                let seen = try await pool.withConnection { try await first.searchPath(on: $0) }
                #expect(seen == "\"$user\", public", "\(first) saw \(seen)")
            }
        }
        #expect(registry.liveCount == 0)
    }

    /// A statement alone on a connection (the fast path: no driver, a free connection) and statements batch after
    /// batch on a driver's connection (`pipelineDepth: 1`, queued behind a held connection: each statement is a
    /// batch of its own, and the probe is the batch after the last change).
    @Test(arguments: Route.allCases)
    func theNextSharedStatementSeesAFreshSession(route: Route) async throws {
        let registry = ResourceRegistry()
        try await Self.withRoute(route) { conninfo in
            try await Self.withPool(conninfo, registry, pipelineDepth: 1) { pool in
                let fresh = try Self.session(try await pool.query(Self.probe))
                for statement in Self.leftByASharedStatement {
                    try await pool.execute(statement)
                    let next = try Self.session(try await pool.query(Self.probe))
                    #expect(next == fresh, "alone: after \(statement): \(next)")
                }
                let held = try await HeldConnection.hold(theOnlyConnectionOf: pool)
                var queued: [Task<PostgresResult, any Error>] = []
                for statement in Self.leftByASharedStatement {
                    queued.append(Task { try await pool.execute(statement) })
                    let count = queued.count
                    try await until("queued", pool.occupancyUpdates()) { $0.queuedStatements == count }
                }
                let probe = Task { try Self.session(try await pool.query(Self.probe)) }
                let all = queued.count + 1
                try await until("the probe queued", pool.occupancyUpdates()) { $0.queuedStatements == all }
                try await held.letGo()
                for task in queued { _ = try await task.value }
                let afterBatches = try await probe.value
                #expect(afterBatches == fresh, "batches: \(afterBatches)")
            }
        }
        #expect(registry.liveCount == 0)
    }

    /// Off: the pool leaves sessions as their users left them (for users who manage them themselves).
    @Test func withTheResetOffTheNextLesseeSeesWhatThePreviousOneLeft() async throws {
        let registry = ResourceRegistry()
        let conninfo = try await TestDatabase.conninfo()
        try await Self.withPool(conninfo, registry, session: PostgresSessionOptions(resetsBetweenUsers: false)) {
            pool in
            _ = try await pool.withConnection { try await $0.execute("SET search_path = pg_catalog") }
            let next = try await pool.withConnection { try Self.session(try await $0.query(Self.probe)) }
            #expect(next[0] == "pg_catalog")
            try await pool.execute("SELECT set_config('search_path', 'information_schema', false)")
            #expect(try Self.session(try await pool.query(Self.probe))[0] == "information_schema")
        }
        #expect(registry.liveCount == 0)
    }

    /// The carried reset and the statement behind it leave in one TCP segment. libpq 15 flushes at each pipeline
    /// sync, so without the cork around them they would be two writes: two segments, two wake-ups of the server.
    @Test func theCarriedResetAndItsStatementLeaveInOneSegment() async throws {
        let registry = ResourceRegistry()
        let conninfo = try await TestDatabase.conninfo()
        try await Self.withPool(conninfo, registry) { pool in
            _ = try await pool.withConnection { try await $0.query("SELECT 1") }  // the next lessee owes the reset
            let segments = try await pool.withConnection { connection in
                let socket = connection.state.withLock { $0.conn?.socket ?? -1 }
                let before = try #require(Self.dataSegmentsOut(socket), "no TCP_INFO: not a TCP connection")
                #expect(try await connection.query("SELECT $1::int", [7]).count == 1)
                return try #require(Self.dataSegmentsOut(socket)) - before
            }
            #expect(segments == 1)
        }
        #expect(registry.liveCount == 0)
    }

    /// The segments carrying data that TCP sent on `socket` (`tcpi_data_segs_out`, at byte 156 of the kernel's
    /// `tcp_info`; the C library's struct ends before it).
    static func dataSegmentsOut(_ socket: Int32) -> UInt32? {
        var info = [UInt8](repeating: 0, count: 232)
        var length = socklen_t(info.count)
        guard getsockopt(socket, Int32(IPPROTO_TCP), TCP_INFO, &info, &length) == 0, length >= 160 else { return nil }
        return info.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 156, as: UInt32.self) }
    }

    /// A lessee that leaves a transaction open and its session changed inside it: the rollback comes first, the
    /// reset after it (a reset inside the block would be rolled back with it).
    @Test func aTransactionLeftOpenIsRolledBackThenTheSessionReset() async throws {
        let registry = ResourceRegistry()
        let conninfo = try await TestDatabase.conninfo()
        try await Self.withPool(conninfo, registry) { pool in
            let fresh = try await pool.withConnection { try Self.session(try await $0.query(Self.probe)) }
            try await pool.withConnection { connection in
                try await connection.execute("SET search_path = pg_catalog")
                try await connection.execute("BEGIN")
                try await connection.execute("SELECT pg_advisory_lock(\(Self.lockKey + 2))")
                try await connection.execute("SET work_mem = '3MB'")
            }
            let next = try await pool.withConnection { try Self.session(try await $0.query(Self.probe)) }
            #expect(next == fresh, "fresh \(fresh), the next lessee saw \(next)")
        }
        #expect(registry.liveCount == 0)
    }

    /// A shared batch whose statement opened a block: the reset written behind it ran inside the block and was
    /// rolled back with it, so the pool runs it again before the next batch (`pipelineDepth: 3`: the three
    /// statements are one batch, the probe queued behind them the next one, on the same driver's connection).
    @Test func aSharedBlockIsRolledBackAndTheSessionResetAgain() async throws {
        let registry = ResourceRegistry()
        let conninfo = try await TestDatabase.conninfo()
        try await Self.withPool(conninfo, registry, pipelineDepth: 3) { pool in
            let fresh = try Self.session(try await pool.query(Self.probe))
            let held = try await HeldConnection.hold(theOnlyConnectionOf: pool)
            let statements = [
                "SELECT set_config('search_path', 'pg_catalog', false)", ";BEGIN",
                "SELECT set_config('work_mem', '3MB', false)",
            ]
            var queued: [Task<PostgresResult, any Error>] = []
            for statement in statements {
                queued.append(Task { try await pool.execute(statement) })
                let count = queued.count
                try await until("queued", pool.occupancyUpdates()) { $0.queuedStatements == count }
            }
            let probe = Task { try Self.session(try await pool.query(Self.probe)) }
            try await until("the probe queued", pool.occupancyUpdates()) { $0.queuedStatements == 4 }
            try await held.letGo()
            for task in queued { _ = await task.result }
            let next = try await probe.value
            #expect(next == fresh, "fresh \(fresh), the next batch saw \(next)")
        }
        #expect(registry.liveCount == 0)
    }
}
