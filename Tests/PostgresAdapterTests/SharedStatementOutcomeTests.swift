import Foundation
import PostgresTestSupport
import ResourceKit
import ResourceKitTesting
import TestSupport
import Testing

@testable import PostgresAdapter

/// What a shared statement's caller is told is what the server did (Docs/Architecture.md, "Shared statements"):
/// nothing acknowledged is lost, nothing cancelled before it was written runs, nothing runs twice but a statement
/// this pool's own cancel stopped, and a known-long statement can keep off the shared path.
@Suite(.serialized) struct SharedStatementOutcomeTests {
    static func count(_ table: String, _ observer: PostgresConnection) async throws -> Int {
        try await observer.query("SELECT count(*)::int FROM \(table)")[0].decode(Int.self, at: 0)
    }

    /// Where the pool connects: the test cluster, or PgBouncer in transaction mode in front of it.
    enum Route: String, CaseIterable, CustomStringConvertible {
        case direct, pgbouncer
        var description: String { rawValue }

        func with<T>(_ conninfo: String, _ body: (String) async throws -> T) async throws -> T {
            switch self {
            case .direct: try await body(conninfo)
            case .pgbouncer: try await PgBouncerProcess.inFront(of: conninfo, body)
            }
        }
    }

    /// Spellings that open a transaction block without looking like `BEGIN` to the keyword check: the server's
    /// tag decides. The opener and every insert after it in its batch fail; no insert reported as done is missing
    /// from the table; the connection is idle and reusable afterwards. Directly and behind PgBouncer in
    /// transaction mode (which keeps the server connection for the block).
    @Test(arguments: [";BEGIN", ";;START TRANSACTION", "; begin isolation level serializable"], Route.allCases)
    func aBlockOpenedUnderAnotherSpellingLosesNoAcknowledgedRow(opener: String, route: Route) async throws {
        #expect(throws: Never.self, "the keyword check must let it through") { try SharedStatementRules.check(opener) }
        let registry = ResourceRegistry()
        let table = "rk_block_\(UInt32.random(in: 0...UInt32.max))"
        let conninfo = try await TestDatabase.conninfo()
        try await route.with(conninfo) { poolConninfo in
            try await withResourceScope("observer", registry: registry) { scope in
                let observer = try await PostgresConnection.connect(conninfo, in: scope)
                try await observer.execute("CREATE TABLE \(table) (n int)")
                defer { Task { try? await observer.execute("DROP TABLE IF EXISTS \(table)") } }
                let pool = try PostgresPool(
                    conninfo: poolConninfo, maxConnections: 1, registry: registry, cancelFastPath: false)
                let held = try await HeldConnection.hold(theOnlyConnectionOf: pool)
                let first = Task { try await pool.execute(opener) }
                try await until("the opener queued", pool.occupancyUpdates()) { $0.queuedStatements == 1 }
                let inserts = (1...6).map { n in
                    Task { try await pool.execute("INSERT INTO \(table) VALUES ($1)", [n]) }
                }
                try await until("all queued", pool.occupancyUpdates()) { $0.queuedStatements == 7 }
                try await held.letGo()
                await #expect { try await first.value } throws: {
                    ($0 as? PostgresError)?.code == .sharedTransactionBlock
                }
                var acknowledged = 0
                for insert in inserts {
                    switch await insert.result {
                    case .success: acknowledged += 1
                    case .failure(let error):
                        #expect((error as? PostgresError)?.code == .sharedTransactionBlock, "\(error)")
                    }
                }
                #expect(try await Self.count(table, observer) == acknowledged, "an acknowledged row is missing")
                // The connection was rolled back before anyone else used it: the next statement commits on its own.
                try await pool.execute("INSERT INTO \(table) VALUES (7)")
                #expect(try await Self.count(table, observer) == acknowledged + 1)
                await pool.shutdown()
                try await observer.execute("DROP TABLE \(table)")
            }
        }
        #expect(registry.liveCount == 0)
    }

    /// Alone on a connection (the pool's fast path, and `sharing: .alone`), the server's status after the
    /// statement decides the same way; directly and behind PgBouncer in transaction mode.
    @Test(arguments: Route.allCases)
    func aBlockOpenedByAStatementAloneIsRolledBackAndReported(route: Route) async throws {
        let registry = ResourceRegistry()
        let table = "rk_block_alone_\(UInt32.random(in: 0...UInt32.max))"
        let conninfo = try await TestDatabase.conninfo()
        try await route.with(conninfo) { poolConninfo in
            try await withResourceScope("observer", registry: registry) { scope in
                let observer = try await PostgresConnection.connect(conninfo, in: scope)
                try await observer.execute("CREATE TABLE \(table) (n int)")
                let pool = try PostgresPool(
                    conninfo: poolConninfo, maxConnections: 1, registry: registry, cancelFastPath: false)
                for sharing in [PostgresPool.Sharing.pipelined, .alone] {
                    await #expect("\(sharing)") { try await pool.execute(";BEGIN", sharing: sharing) } throws: {
                        ($0 as? PostgresError)?.code == .sharedTransactionBlock
                    }
                    try await pool.execute("INSERT INTO \(table) VALUES (1)", sharing: sharing)
                }
                #expect(try await Self.count(table, observer) == 2, "each insert after the refused block committed")
                await pool.shutdown()
                try await observer.execute("DROP TABLE \(table)")
            }
        }
        #expect(registry.liveCount == 0)
    }

    /// A batch taken while its connection waits for an earlier cancel to settle (held back 200 ms by a relay, as
    /// behind a pooler or a slow network): statements whose callers are cancelled in that window are never
    /// written, so none of them commits.
    @Test func aStatementCancelledWhileItsBatchWaitsForACancelToSettleNeverRuns() async throws {
        let registry = ResourceRegistry()
        let table = "rk_settle_\(UInt32.random(in: 0...UInt32.max))"
        let conninfo = try await TestDatabase.conninfo()
        let upstream = try #require(SlowCancelRelay.port(of: conninfo), "a TCP conninfo: \(conninfo)")
        let relay = try await SlowCancelRelay.start(upstream: upstream, hold: .milliseconds(200))
        try await withResourceScope("observer", registry: registry) { scope in
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            try await observer.execute("CREATE TABLE \(table) (n int)")
            let pool = try PostgresPool(
                conninfo: relay.conninfo(replacingPortOf: conninfo), maxConnections: 1, registry: registry,
                cancelFastPath: false)
            let held = try await HeldConnection.hold(theOnlyConnectionOf: pool)
            let marker = statementMarker("settle")
            let sleeper = Task { try await pool.execute("SELECT pg_sleep(30) /* \(marker) */") }
            try await until("the sleep queued", pool.occupancyUpdates()) { $0.queuedStatements == 1 }
            try await held.letGo()
            _ = try await TestDatabase.activeBackend(running: marker, observer: observer)
            let inserts = (1...32).map { n in Task { try await pool.execute("INSERT INTO \(table) VALUES ($1)", [n]) } }
            try await until("all queued", pool.occupancyUpdates()) { $0.queuedStatements == 32 }
            let updates = pool.occupancyUpdates()
            sleeper.cancel()
            await #expect(throws: CancellationError.self) { try await sleeper.value }
            // The sleep stopped; the driver took its next batch, which waits for the cancel to settle.
            try await until("the next batch taken", updates) { $0.queuedStatements < 32 }
            for insert in inserts { insert.cancel() }
            for insert in inserts {
                await #expect(throws: CancellationError.self) { try await insert.value }
            }
            // Whatever the driver does next (the cancel settles, it finds nothing to write), nothing arrives.
            #expect(try await pool.execute("SELECT 1").commandTag == "SELECT 1")
            #expect(try await Self.count(table, observer) == 0, "a cancelled statement committed")
            await pool.shutdown()
            try await observer.execute("DROP TABLE \(table)")
        }
        await relay.stop()
        #expect(registry.liveCount == 0)
    }

    /// Under `statement_timeout`, with random cancels of other callers (so that the pool's own cancels land
    /// late), no statement the timeout stopped runs again. Each run of the statement raises a notice when it starts,
    /// and one with the reason when a cancel or the timeout stops it (the function catches `query_canceled` and
    /// raises it again): a statement may run again only after a run that a *cancel* stopped (the pool's cancel for
    /// another statement of its batch, landed late: the documented resend), never after one the timeout stopped.
    /// The callers that were not cancelled get the timeout itself.
    @Test func aTimedOutStatementRunsOnce() async throws {
        let registry = ResourceRegistry()
        let function = "rk_note_\(UInt32.random(in: 0...UInt32.max))"
        // Per statement, what its runs reported, in order: "ran", "stopped: <the server's message>".
        let runs = Locked<[Int: [String]]>([:])
        try await withResourceScope("observer", registry: registry) { scope in
            let conninfo = try await TestDatabase.conninfo()
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            try await observer.execute(
                """
                CREATE FUNCTION \(function)(n int) RETURNS int LANGUAGE plpgsql AS $$
                DECLARE reason text;
                BEGIN
                    RAISE NOTICE 'rk-ran %', n;
                    PERFORM pg_sleep(0.05);
                    RETURN n;
                EXCEPTION WHEN query_canceled THEN
                    GET STACKED DIAGNOSTICS reason = MESSAGE_TEXT;
                    RAISE NOTICE 'rk-stopped % %', n, reason;
                    RAISE;
                END $$
                """)
            let pool = try PostgresPool(
                conninfo: conninfo + " options='-c statement_timeout=20'", maxConnections: 2, registry: registry,
                onNotice: { notice in
                    let words = notice.message.split(separator: " ", maxSplits: 2).map(String.init)
                    guard words.count >= 2, let n = Int(words[1]) else { return }
                    switch words[0] {
                    case "rk-ran": runs.withLock { $0[n, default: []].append("ran") }
                    case "rk-stopped": runs.withLock { $0[n, default: []].append("stopped: \(words.last ?? "")") }
                    default: return
                    }
                })
            try await withThrowingTaskGroup(of: Void.self) { group in
                for n in 0..<400 {
                    let statement = Task { try await pool.execute("SELECT \(function)($1::int)", [n]) }
                    group.addTask {
                        if Int.random(in: 0..<3) == 0 {
                            try await Task.sleep(for: .microseconds(Int.random(in: 0...30_000)))
                            statement.cancel()
                        }
                        switch await statement.result {
                        case .success: Issue.record("statement \(n) outran a 20 ms timeout sleeping 50 ms")
                        case .failure(let error as PostgresError):
                            #expect(error.isStatementTimeout, "\(error)")
                        case .failure(let error):
                            #expect(error is CancellationError, "\(error)")
                        }
                    }
                    if n % 16 == 15 { try await group.next() }
                }
                try await group.waitForAll()
            }
            await pool.shutdown()
            try await observer.execute("DROP FUNCTION \(function)(int)")
        }
        let reports = runs.withLock { $0 }
        var timedOut = 0
        var resentAfterACancel = 0
        for (n, events) in reports {
            for (index, event) in events.enumerated() where event == "ran" && index > 0 {
                let before = events[index - 1]
                #expect(
                    before.hasPrefix("stopped:") && !before.contains("statement timeout"),
                    "statement \(n) ran again after \(before): \(events)")
                resentAfterACancel += 1
            }
            timedOut += events.filter { $0.contains("statement timeout") }.count
        }
        #expect(timedOut > 0, "no statement was stopped by the timeout: the check above saw nothing")
        #expect(reports.values.allSatisfy { $0.filter { $0.contains("statement timeout") }.count <= 1 })
        print("timed-out statements: \(timedOut), sent again after a cancel meant for another: \(resentAfterACancel)")
        #expect(registry.liveCount == 0)
    }

    /// A known-long statement kept off the shared path (`sharing: .alone`) holds no fast statement behind it.
    @Test func aLongStatementAloneHoldsNoFastOneBehindIt() async throws {
        let registry = ResourceRegistry()
        let pool = try PostgresPool(
            conninfo: try await TestDatabase.conninfo(), maxConnections: 4, registry: registry, cancelFastPath: false)
        let slowest = Locked(Duration.zero)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<2 {
                group.addTask { try await pool.execute("SELECT pg_sleep(1)", sharing: .alone) }
            }
            let end = ContinuousClock.now + .milliseconds(1_200)
            for task in 0..<16 {
                group.addTask {
                    while ContinuousClock.now < end {
                        let started = ContinuousClock.now
                        let value = try await pool.query("SELECT $1::int", [task]).first?.decode(Int.self, at: 0)
                        #expect(value == task)
                        let took = ContinuousClock.now - started
                        slowest.withLock { $0 = max($0, took) }
                    }
                }
            }
            try await group.waitForAll()
        }
        // A batch-mate of a 1 s statement would wait a second; the bound is generous for a loaded machine.
        #expect(slowest.withLock { $0 } < .milliseconds(700), "a fast statement waited \(slowest.withLock { $0 })")
        await pool.shutdown()
        #expect(registry.liveCount == 0)
    }
}
