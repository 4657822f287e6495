import PostgresTestSupport
import Foundation
import ResourceKit
import ResourceKitIO
import ResourceKitTesting
import TestSupport
import Testing

@testable import PostgresAdapter

/// Shared statements (`PostgresPool.execute`) against a real server: batching, one statement's error, cancels of
/// queued and sent statements, refusals, shutdown.
@Suite struct SharedStatementTests {
    /// A pool of one whose connection a holder keeps (after a query) until it is let go: shared statements
    /// submitted meanwhile queue, and go out together as one batch when it lets go.
    static func poolOfOneHeld(
        registry: ResourceRegistry, depth: Int = 8
    ) async throws -> (PostgresPool, HeldConnection) {
        let pool = try PostgresPool(
            conninfo: try await TestDatabase.conninfo(), maxConnections: 1, registry: registry, cancelFastPath: false,
            pipelineDepth: depth)
        return (pool, try await HeldConnection.hold(theOnlyConnectionOf: pool))
    }

    static func value(_ result: PostgresResult) throws -> Int {
        try #require(result.rows.first).decode(Int.self, at: 0)
    }

    /// Many tasks over two connections: every caller gets its own answer.
    @Test func everyCallerGetsItsOwnAnswer() async throws {
        let registry = ResourceRegistry()
        let pool = try PostgresPool(
            conninfo: try await TestDatabase.conninfo(), maxConnections: 2, registry: registry, cancelFastPath: false)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<64 {
                group.addTask {
                    for index in 0..<20 {
                        let asked = task * 1_000 + index
                        let answer = try await Self.value(pool.execute("SELECT $1::int", [asked]))
                        #expect(answer == asked)
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(pool.openCount <= 2)
        await pool.shutdown()
        #expect(registry.liveCount == 0)
    }

    /// Statements queued behind a held connection go out as one batch; a failing one fails only its own caller,
    /// and a committed one stays committed (each statement has its own sync: its own implicit transaction).
    @Test func aFailingStatementFailsOnlyItsOwnCaller() async throws {
        let registry = ResourceRegistry()
        let table = "rk_shared_\(UInt32.random(in: 0...UInt32.max))"
        let setup = try PostgresPool(
            conninfo: try await TestDatabase.conninfo(), maxConnections: 1, registry: registry, cancelFastPath: false)
        _ = try await setup.withConnection { try await $0.execute("CREATE TABLE \(table) (n int)") }
        await setup.shutdown()

        let (pool, held) = try await Self.poolOfOneHeld(registry: registry)
        let insertBefore = Task { try await pool.execute("INSERT INTO \(table) VALUES (1)") }
        try await until("one statement queued", pool.occupancyUpdates()) { $0.queuedStatements == 1 }
        let failing = Task { try await pool.execute("SELECT 1 / $1::int", [0]) }
        try await until("two statements queued", pool.occupancyUpdates()) { $0.queuedStatements == 2 }
        let insertAfter = Task { try await pool.execute("INSERT INTO \(table) VALUES (2)") }
        let select = Task { try await Self.value(pool.execute("SELECT $1::int", [7])) }
        try await until("four statements queued", pool.occupancyUpdates()) { $0.queuedStatements == 4 }
        try await held.letGo()

        await #expect { try await failing.value } throws: { ($0 as? PostgresError)?.sqlState == "22012" }
        #expect(try await insertBefore.value.affectedRows == 1)
        #expect(try await insertAfter.value.affectedRows == 1)
        #expect(try await select.value == 7)
        let rows = try await pool.query("SELECT n FROM \(table) ORDER BY n").map { try $0.decode(Int.self, at: 0) }
        #expect(rows == [1, 2], "each statement is its own transaction: the error rolled back no other")
        try await pool.execute("DROP TABLE \(table)")
        await pool.shutdown()
        #expect(registry.liveCount == 0)
    }

    /// A queued statement whose task is cancelled throws at once and is never sent.
    @Test func aQueuedStatementThatIsCancelledIsNeverSent() async throws {
        let registry = ResourceRegistry()
        let table = "rk_shared_\(UInt32.random(in: 0...UInt32.max))"
        let (pool, held) = try await Self.poolOfOneHeld(registry: registry)
        let created = Task { try await pool.execute("CREATE TABLE \(table) (n int)") }
        try await until("the create queued", pool.occupancyUpdates()) { $0.queuedStatements == 1 }
        let insert = Task { try await pool.execute("INSERT INTO \(table) VALUES (1)") }
        try await until("the insert queued", pool.occupancyUpdates()) { $0.queuedStatements == 2 }
        insert.cancel()
        await #expect(throws: CancellationError.self) { try await insert.value }
        #expect(pool.occupancy.queuedStatements == 1, "the cancelled statement left the queue")
        try await held.letGo()
        _ = try await created.value
        #expect(try await pool.query("SELECT count(*)::int FROM \(table)").first?.decode(Int.self, at: 0) == 0)
        try await pool.execute("DROP TABLE \(table)")
        await pool.shutdown()
        #expect(registry.liveCount == 0)
    }

    /// A sent statement whose task is cancelled throws at once and stops on the server; the statements sent with
    /// it all succeed (a `57014` the cancel caused in one of them is sent again), and the connection stays usable.
    @Test func aSentStatementThatIsCancelledStopsAndSparesTheOthers() async throws {
        let registry = ResourceRegistry()
        try await withResourceScope("observer", registry: registry) { scope in
            let observer = try await PostgresConnection.connect(try await TestDatabase.conninfo(), in: scope)
            let (pool, held) = try await Self.poolOfOneHeld(registry: registry, depth: 16)
            let marker = statementMarker("shared")
            let sleeper = Task { try await pool.execute("SELECT pg_sleep(30) /* \(marker) */") }
            try await until("the sleep queued", pool.occupancyUpdates()) { $0.queuedStatements == 1 }
            let others = (0..<12).map { index in
                Task { try await Self.value(pool.execute("SELECT $1::int", [index])) }
            }
            try await until("all queued", pool.occupancyUpdates()) { $0.queuedStatements == 13 }
            try await held.letGo()
            let pid = try await TestDatabase.activeBackend(running: marker, observer: observer)
            let cancelled = ContinuousClock.now
            sleeper.cancel()
            await #expect(throws: CancellationError.self) { try await sleeper.value }
            #expect(ContinuousClock.now - cancelled < TimingBound.singleShot)
            for (index, other) in others.enumerated() { #expect(try await other.value == index) }
            #expect(try await TestDatabase.waitUntilNotActive(pid, observer: observer) != nil)
            #expect(try await Self.value(pool.execute("SELECT $1::int", [42])) == 42)
            await pool.shutdown()
        }
        #expect(registry.liveCount == 0)
    }

    /// PostgreSQL cancels what the backend runs when the cancel lands: a cancel meant for a statement that has
    /// just finished (its result not read yet) stops the next statement of the batch instead. That statement is
    /// sent again, and its caller gets its answer, not `57014`. Made certain with events, not time: each statement
    /// waits on an advisory lock the observer holds, and the pool's reactor is held (so that the first
    /// statement's result waits unread) from before the first is let go until the cancel has stopped the second.
    @Test func aStatementHitByAnotherOnesCancelIsSentAgain() async throws {
        let registry = ResourceRegistry()
        let reactor = IOReactor(name: "rk.test.shared")
        defer { reactor.shutdown() }
        try await withResourceScope("observer", registry: registry) { scope in
            let conninfo = try await TestDatabase.conninfo()
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            let (firstLock, secondLock) = (Int.random(in: 1...Int(Int32.max)), Int.random(in: 1...Int(Int32.max)))
            _ = try await observer.execute(
                "SELECT pg_advisory_lock($1), pg_advisory_lock($2)", [firstLock, secondLock])
            let pool = try PostgresPool(
                conninfo: conninfo, maxConnections: 1, registry: registry, reactor: reactor, cancelFastPath: false)
            let held = try await HeldConnection.hold(theOnlyConnectionOf: pool)
            let first = Task { try await pool.execute("SELECT 1 FROM pg_advisory_xact_lock($1)", [firstLock]) }
            try await until("the first queued", pool.occupancyUpdates()) { $0.queuedStatements == 1 }
            let marker = statementMarker("hit")
            let second = Task {
                try await Self.value(
                    pool.execute("SELECT 2 FROM pg_advisory_xact_lock($1) /* \(marker) */", [secondLock]))
            }
            try await until("both queued", pool.occupancyUpdates()) { $0.queuedStatements == 2 }
            let updates = pool.occupancyUpdates()
            try await held.letGo()
            try await until("the batch taken", updates) { $0.queuedStatements == 0 }
            // The first waits for its lock on the server; hold the reactor, so that no result is read, then let
            // the first finish there: its result waits unread, and the second runs (waiting for its own lock).
            let hold = ReactorHold(reactor)
            try await hold.started.wait()
            _ = try await observer.execute("SELECT pg_advisory_unlock($1)", [firstLock])
            let pid = try await TestDatabase.activeBackend(running: marker, observer: observer)
            first.cancel()
            await #expect(throws: CancellationError.self) { try await first.value }
            // The cancel (meant for the first) stops the second, which the server then reports as 57014.
            #expect(try await TestDatabase.waitUntilNotActive(pid, observer: observer) != nil)
            _ = try await observer.execute("SELECT pg_advisory_unlock($1)", [secondLock])
            hold.release()
            #expect(try await second.value == 2, "the statement hit by another's cancel must be sent again")
            await pool.shutdown()
        }
        #expect(registry.liveCount == 0)
    }

    /// Statements that would leave state in a shared session are refused before anything is sent, with a message
    /// that names the kind of statement and not its text.
    @Test(arguments: [
        "BEGIN", "  /* a comment */ begin", "-- first\nSTART TRANSACTION", "commit", "SAVEPOINT s",
        "SET search_path = x",
        "RESET ALL", "LISTEN channel", "DECLARE c CURSOR FOR SELECT 1", "CREATE TEMP TABLE t (n int)",
        "create local temporary table t (n int)", "COPY t TO STDOUT", "(BEGIN)", "/* a /* nested */ comment */ BEGIN",
        "PREPARE p AS SELECT 1",
    ])
    func statementsThatWouldLeaveSessionStateAreRefused(sql: String) async throws {
        let registry = ResourceRegistry()
        let pool = try PostgresPool(
            conninfo: try await TestDatabase.conninfo(), maxConnections: 1, registry: registry, cancelFastPath: false)
        await #expect { try await pool.execute(sql) } throws: { error in
            guard let error = error as? PostgresError, error.code == .invalidQuery else { return false }
            return !error.message.contains(sql) && error.message.contains("withConnection")
        }
        #expect(pool.openCount == 0, "nothing was sent")
        await pool.shutdown()
    }

    /// What the rule must not refuse: ordinary statements whose words merely look like refused ones.
    @Test func ordinaryStatementsAreNotRefused() throws {
        for sql in [
            "SELECT 1", "CREATE TABLE temperature (n int)", "SELECT 'BEGIN'", "WITH x AS (SELECT 1) SELECT * FROM x",
            "INSERT INTO settings VALUES (1)", "", "-- only a comment", "/* unterminated", "UPDATE t SET n = 1",
            "CREATE TABLE t (n int)",
        ] {
            #expect(throws: Never.self, "\(sql)") { try SharedStatementRules.check(sql) }
        }
    }

    /// Shutting the pool down fails the queued statements with `poolClosed`.
    @Test func shutdownFailsTheQueuedStatements() async throws {
        let registry = ResourceRegistry()
        let (pool, held) = try await Self.poolOfOneHeld(registry: registry)
        let queued = Task { try await pool.execute("SELECT 1") }
        try await until("a statement queued", pool.occupancyUpdates()) { $0.queuedStatements == 1 }
        let shutdown = Task { await pool.shutdown() }
        await #expect { try await queued.value } throws: { ($0 as? PostgresError)?.code == .poolClosed }
        try await held.letGo()
        await shutdown.value
        await #expect { try await pool.execute("SELECT 1") } throws: { ($0 as? PostgresError)?.code == .poolClosed }
        await pool.shutdown()  // again: the held connection came back after the first one and is closed by now
        #expect(registry.liveCount == 0)
    }

    /// A borrowing scope's cancel reaches a queued statement of a task inside it (the task itself is not
    /// cancelled): it throws `CancellationError` and leaves the queue.
    @Test func aScopeCancelReachesAQueuedStatement() async throws {
        let registry = ResourceRegistry()
        let (pool, held) = try await Self.poolOfOneHeld(registry: registry)
        let borrower = Locked<ResourceScope?>(nil)
        let outcome = Task {
            try await withResourceScope("borrower", registry: registry) { scope in
                borrower.withLock { $0 = scope }
                do {
                    try await pool.execute("SELECT 1")
                    return "ran"
                } catch {
                    return error is CancellationError ? "cancelled" : "\(error)"
                }
            }
        }
        try await until("a statement queued", pool.occupancyUpdates()) { $0.queuedStatements == 1 }
        try #require(borrower.withLock { $0 }).cancel()
        #expect(try await outcome.value == "cancelled")
        #expect(pool.occupancy.queuedStatements == 0)
        try await held.letGo()
        await pool.shutdown()
        #expect(registry.liveCount == 0)
    }
}

/// Holds a reactor's thread (a task on it blocks) until released: its readiness events wait meanwhile.
final class ReactorHold: Sendable {
    let started = OneShotEvent()
    private let gate = DispatchSemaphore(value: 0)

    init(_ reactor: IOReactor) {
        // Owned: released by `release()`, which every test that makes one calls.
        Task(executorPreference: reactor) { [self] in
            started.set()
            block()
        }
    }

    private func block() { gate.wait() }

    func release() { gate.signal() }
}
