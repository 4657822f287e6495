import Foundation
import PostgresTestSupport
import ResourceKit
import TestSupport
import Testing

@testable import PostgresAdapter

/// The carried session reset shares the next statement's sync when the statement may run there, and keeps a sync
/// of its own before the rest (Docs/Architecture.md, "Clean sessions"); the pool asks for its vanished-client
/// check in the startup packet, where the reset keeps it, and falls back when a pooler refuses that.
@Suite(.serialized) struct GroupedResetTests {
    /// The data segments TCP received on `socket` (`tcpi_data_segs_in`, at byte 152 of the kernel's `tcp_info`).
    static func dataSegmentsIn(_ socket: Int32) -> UInt32? {
        var info = [UInt8](repeating: 0, count: 232)
        var length = socklen_t(info.count)
        guard getsockopt(socket, Int32(IPPROTO_TCP), TCP_INFO, &info, &length) == 0, length >= 160 else { return nil }
        return info.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 152, as: UInt32.self) }
    }

    /// The data segments `count` (in or out) reads on a pooled connection's socket while `query` runs as the first
    /// statement of a lease that owes the reset.
    static func segments(
        _ count: @escaping @Sendable (Int32) -> UInt32?,
        whileTheNextLesseeRuns query: @escaping @Sendable (PostgresConnection) async throws -> [PostgresRow]
    ) async throws -> UInt32 {
        let registry = ResourceRegistry()
        let conninfo = try await TestDatabase.conninfo()
        let segments = try await SessionResetTests.withPool(conninfo, registry) { pool in
            _ = try await pool.withConnection { try await $0.query("SELECT 1") }  // the next lessee owes the reset
            return try await pool.withConnection { connection in
                let socket = connection.state.withLock { $0.conn?.socket ?? -1 }
                let before = try #require(count(socket), "no TCP_INFO: not a TCP connection")
                #expect(try await query(connection).count == 1)
                return try #require(count(socket)) - before
            }
        }
        #expect(registry.liveCount == 0)
        return segments
    }

    /// A query carrying the reset is answered in one segment: one sync, one ReadyForQuery, one flush by the
    /// server (behind a sync of its own the reset's answer would be flushed apart).
    @Test func aQueryCarryingTheResetIsAnsweredInOneSegment() async throws {
        let segments = try await Self.segments(Self.dataSegmentsIn) { try await $0.query("SELECT $1::int", [7]) }
        #expect(segments == 1)
    }

    /// A statement under a deadline carries the reset behind a sync of its own (its prelude sets the carried
    /// `statement_timeout`): libpq 15 flushes at each sync, and the cork around both still makes them one segment.
    @Test func aResetCarriedInFrontOfADeadlinesPreludeLeavesInOneSegment() async throws {
        let segments = try await Self.segments(SessionResetTests.dataSegmentsOut) { connection in
            try await withResourceOperation(boundTo: nil, deadline: .now + .seconds(30), onCancel: { _ in }) {
                try await connection.query("SELECT $1::int", [7])
            }
        }
        #expect(segments == 1)
    }

    /// A fresh session's probe, and the probe of the lessee after the one that ran `dirtying`, taken right after
    /// its own first statement, `first` (so the reset is carried in front of `first`).
    static func probes(
        dirtying: [String], first: @escaping @Sendable (PostgresConnection) async throws -> Void
    ) async throws -> (fresh: [String], next: [String]) {
        let registry = ResourceRegistry()
        let conninfo = try await TestDatabase.conninfo()
        let probes = try await SessionResetTests.withPool(conninfo, registry) { pool in
            let fresh = try await pool.withConnection {
                try SessionResetTests.session(try await $0.query(SessionResetTests.probe))
            }
            try await pool.withConnection { connection in
                for statement in dirtying { try await connection.execute(statement) }
            }
            let next = try await pool.withConnection { connection in
                try await first(connection)
                return try SessionResetTests.session(try await connection.query(SessionResetTests.probe))
            }
            return (fresh, next)
        }
        #expect(registry.liveCount == 0)
        return probes
    }

    /// The statement under the reset's sync fails: the reset committed before it (the first statement after a
    /// sync), so the lessee's next statement sees a fresh session all the same, and the check interval the pool
    /// asked for at startup is still there.
    @Test func aFailedStatementUnderTheResetsSyncLeavesTheSessionReset() async throws {
        let (fresh, next) = try await Self.probes(dirtying: SessionResetTests.leftByALessee) { connection in
            await #expect(throws: PostgresError.self) { try await connection.execute("SELECT 1/0") }
        }
        #expect(fresh[3] == "1s", "the pool's check interval: \(fresh)")
        #expect(next == fresh, "fresh \(fresh), after a failed first statement \(next)")
    }

    /// Whether the session has no temporary table `rk_reset_blocker`: a reset ran since the lessee that made it.
    static let resetSinceBlocker = "SELECT to_regclass('pg_temp.rk_reset_blocker') IS NULL"

    /// A lease whose reset waits for a lock (``withResetBlocked(_:)``).
    struct BlockedReset: Sendable {
        let lease: PostgresConnection
        /// The lease's backend.
        let pid: Int32
        /// The session that holds the lock, in a transaction.
        let locker: PostgresConnection
        /// Another session: one reads `pg_stat_activity` once per transaction, so the locker would see the lessee
        /// as it was at its first look.
        let observer: PostgresConnection
    }

    /// A pool of one whose next lease owes a reset that cannot finish: its `DISCARD ALL` waits for a lock on the
    /// previous lessee's temporary table, which the locker holds in a transaction.
    static func withResetBlocked(_ body: @escaping @Sendable (BlockedReset) async throws -> Void) async throws {
        let registry = ResourceRegistry()
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("observer", registry: registry) { scope in
            let locker = try await PostgresConnection.connect(conninfo, in: scope)
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            try await SessionResetTests.withPool(conninfo, registry) { pool in
                let schema = try await pool.withConnection { connection in
                    try await connection.execute("CREATE TEMP TABLE rk_reset_blocker (n int)")
                    return try await connection.query("SELECT pg_my_temp_schema()::regnamespace::text")[0].decode(
                        String.self, at: 0)
                }
                try await locker.execute("BEGIN")
                try await locker.execute("LOCK TABLE \(schema).rk_reset_blocker IN ACCESS SHARE MODE")
                try await pool.withConnection { connection in
                    let pid = try #require(connection.backendPID)
                    try await body(BlockedReset(lease: connection, pid: pid, locker: locker, observer: observer))
                }
            }
        }
        #expect(registry.liveCount == 0)
    }

    /// Another client cancels the reset under the statement's sync, while `DISCARD ALL` waits for a lock on the
    /// previous lessee's temporary table that a third session holds: the server skips the statement, its caller
    /// gets the reset's error (`57014`, not its own cancel: a `PostgresError`), and the reset is owed again, so
    /// the lessee's next statement carries it and sees a fresh session.
    @Test func aResetCancelledUnderTheStatementsSyncFailsTheStatementAndIsOwedAgain() async throws {
        try await Self.withResetBlocked { blocked in
            let (connection, pid, locker, observer) = (blocked.lease, blocked.pid, blocked.locker, blocked.observer)
            let canceller = Task {
                // Active from here on: its DISCARD ALL waits for the locker's lock until cancelled.
                do {
                    try await TestDatabase.waitUntilActive(pid, observer: observer)
                    _ = try await observer.query("SELECT pg_cancel_backend($1)", [pid])
                } catch {
                    _ = try? await locker.execute("ROLLBACK")  // the lock, so that the query ends anyway
                    throw error
                }
            }
            let failure = await #expect(throws: PostgresError.self) { try await connection.query("SELECT 1") }
            #expect(failure?.sqlState == "57014", "\(String(describing: failure))")
            try await canceller.value
            try await locker.execute("COMMIT")
            #expect(try await connection.query(Self.resetSinceBlocker)[0].decode(Bool.self, at: 0) == true)
        }
    }

    /// The lessee's own task is cancelled while the reset in front of its statement waits for that lock: the caller
    /// returns at once, our cancel stops `DISCARD ALL` on the server, and the cleanup that drains the abandoned
    /// pipeline finds the reset failed and owes it again, so the lessee's next statement sees a fresh session.
    @Test func aResetDrainedAfterItsCallerWasCancelledIsOwedAgain() async throws {
        try await Self.withResetBlocked { blocked in
            let (connection, pid, locker, observer) = (blocked.lease, blocked.pid, blocked.locker, blocked.observer)
            let caller = Task { try await connection.query("SELECT 1") }
            do {
                try await TestDatabase.waitUntilActive(pid, observer: observer)
            } catch {
                try await locker.execute("ROLLBACK")
                throw error
            }
            caller.cancel()
            await #expect(throws: CancellationError.self) { _ = try await caller.value }
            try await locker.execute("COMMIT")
            #expect(try await connection.query(Self.resetSinceBlocker)[0].decode(Bool.self, at: 0) == true)
        }
    }

    /// A statement that may not run in a transaction block (`VACUUM`) comes first after a dirty session, under the
    /// reset's sync: the reset committed at once, so the statement leads a transaction of its own, as it would
    /// alone (a `SET` restored behind the reset would make it the second, and it would fail).
    @Test func vacuumFirstAfterADirtySessionRunsUnderTheResetsSync() async throws {
        let (fresh, next) = try await Self.probes(dirtying: ["SET search_path = pg_catalog"]) { connection in
            try await connection.execute("VACUUM pg_catalog.pg_am")
        }
        #expect(next == fresh, "fresh \(fresh), after VACUUM \(next)")
    }

    /// PgBouncer refuses `options` in the startup packet: the pool's first open is refused for it, the pool opens
    /// again at once without it, says so once, and asks after connect from then on.
    @Test func aPoolBehindAPoolerThatRefusesStartupOptionsOpensWithout() async throws {
        let registry = ResourceRegistry()
        let conninfo = try await TestDatabase.conninfo()
        try await PgBouncerProcess.inFront(of: conninfo, poolSize: 2) { bouncer in
            let pool = try PostgresPool(conninfo: bouncer, maxConnections: 2, registry: registry, cancelFastPath: false)
            do {
                async let first = pool.withConnection { try await $0.query("SELECT 1").count }
                async let second = pool.withConnection { try await $0.query("SELECT 2").count }
                #expect(try await first + second == 2)
                let events = registry.snapshot().counters[PostgresConnection.kind.name]?.adapterEvents ?? [:]
                #expect((1...2).contains(events["postgres.pool.startupSettingRefused"] ?? 0), "\(events)")
                _ = try await pool.withConnection { try await $0.query("SELECT 3") }
            } catch {
                await pool.shutdown()
                throw error
            }
            await pool.shutdown()
        }
        #expect(registry.liveCount == 0)
    }

    /// The setting goes after the conninfo's own `options`, or after `PGOPTIONS` when it sets none; a conninfo that
    /// names a service and sets no `options` is left alone (the service's `options` would be replaced).
    @Test func theStartupSettingKeepsTheOptionsItJoins() throws {
        func options(_ conninfo: String, _ environment: [String: String]) throws -> String? {
            var info = try ConnectionInfo(conninfo)
            guard info.addStartupSetting("client_connection_check_interval", "1000", environment: environment) else {
                return nil
            }
            return info.value(of: "options")
        }
        let setting = "-c client_connection_check_interval=1000"
        #expect(try options("host=h", [:]) == setting)
        #expect(try options("host=h options='-c work_mem=1MB'", [:]) == "-c work_mem=1MB " + setting)
        #expect(try options("postgresql://h/d?options=-c%20work_mem%3D1MB", [:]) == "-c work_mem=1MB " + setting)
        #expect(try options("host=h", ["PGOPTIONS": "-c work_mem=2MB"]) == "-c work_mem=2MB " + setting)
        #expect(try options("host=h options=''", ["PGOPTIONS": "-c work_mem=2MB"]) == setting)
        #expect(try options("service=s", [:]) == nil)
        #expect(try options("host=h", ["PGSERVICE": "s"]) == nil)
        #expect(try options("service=s options='-c work_mem=1MB'", [:]) == "-c work_mem=1MB " + setting)
    }

    @Test func theStartupPlanFallsBackOnceForAnyRefusalOfTheSetting() {
        var plan = StartupSettingsPlan.inStartupPacket
        #expect(plan.asksInStartupPacket)
        let unrelated = plan.startupPacketFailed("could not connect: connection refused")
        #expect(!unrelated)
        #expect(plan == .inStartupPacket)
        let refused = plan.startupPacketFailed("ERROR:  unsupported startup parameter: options")
        #expect(refused)
        #expect(plan == .afterConnect && !plan.asksInStartupPacket)
        var old = StartupSettingsPlan.inStartupPacket
        let unknown = old.startupPacketFailed(
            "FATAL:  unrecognized configuration parameter \"client_connection_check_interval\"")
        #expect(unknown)
        #expect(old == .afterConnect)
    }
}
