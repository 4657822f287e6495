import Foundation
import PostgresTestSupport
import ResourceKit
import ResourceKitIO
import ResourceKitTesting
import TestSupport
import Testing

@testable import PostgresAdapter
import PostgresActivity

/// The cancellation scenarios that mature Postgres clients test (numbered as in the other suites), against a real
/// server.
@Suite struct PostgresCancellationTests {
    /// Scenarios 1, 2, 3: cancel `pg_sleep(20)` mid-query for every API, from the cooperative pool and from a task
    /// on the reactor's thread (it prefers the reactor as its executor); `CancellationError` and the backend no
    /// longer active promptly (`TimingBound.singleShot`: a broken path waits 20 s), and `SELECT 1` works on the
    /// same connection afterwards.
    @Test(arguments: ["execute", "query", "stream"], [false, true])
    func cancelRunningSleepForEveryAPI(api: String, onReactor: Bool) async throws {
        let conninfo = try await TestDatabase.conninfo()
        let registry = ResourceRegistry()
        try await withResourceScope("pg", registry: registry) { scope in
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            let pid = try #require(connection.backendPID)
            let task = Task(executorPreference: onReactor ? IOReactor.shared : nil) {
                switch api {
                case "execute": try await connection.execute("SELECT pg_sleep(20)")
                case "query": _ = try await connection.query("SELECT pg_sleep($1)", [20.0])
                default:
                    for try await _ in try await connection.stream("SELECT pg_sleep(20)") {}
                }
            }
            try await TestDatabase.waitUntilActive(pid, observer: observer)
            let cancelled = ContinuousClock.now
            task.cancel()
            await #expect(throws: CancellationError.self) { try await task.value }
            #expect(ContinuousClock.now - cancelled < TimingBound.singleShot)
            let idleAfter = try await TestDatabase.waitUntilNotActive(pid, observer: observer)
            #expect(idleAfter != nil, "backend still active \(TimingBound.singleShot) after cancel")
            let one = try await connection.query("SELECT 1").first?.decode(Int.self, at: 0)
            #expect(one == 1)
        }
        #expect(registry.liveCount == 0)
    }

    /// Scenario 4: a query that completes before the cancel returns its result; nothing is sent.
    @Test func cancelAfterCompletionReturnsTheResult() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("pg", registry: ResourceRegistry()) { scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            let task = Task { try await connection.query("SELECT 42").first?.decode(Int.self, at: 0) }
            let value = try await task.value
            task.cancel()
            #expect(value == 42)
            #expect(connection.state.withLock { $0.machine.cancels } == nil)
            #expect(!connection.needsReset)
        }
    }

    /// Scenario 5: cancel inside a transaction → the transaction is failed; ROLLBACK → idle; the connection
    /// works.
    @Test func cancelInsideTransactionThenRollback() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("pg", registry: ResourceRegistry()) { scope in
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            try await connection.execute("BEGIN")
            let task = Task { try await connection.execute("SELECT pg_sleep(20)") }
            try await TestDatabase.waitUntilActive(try #require(connection.backendPID), observer: observer)
            task.cancel()
            await #expect(throws: CancellationError.self) { try await task.value }
            await #expect { try await connection.execute("SELECT 1") } throws: {
                ($0 as? PostgresError)?.sqlState == "25P02"  // in_failed_sql_transaction
            }
            try await connection.execute("ROLLBACK")
            #expect(try await connection.query("SELECT 1").count == 1)
        }
    }

    /// Scenario 7: cancel while idle; scenario 8: an already-cancelled task sends nothing.
    @Test func cancelWhileIdleAndAlreadyCancelledTask() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("pg", registry: ResourceRegistry()) { scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            connection.cancelCurrentQuery()
            #expect(try await connection.query("SELECT 1").count == 1)
            let task = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await connection.execute("SELECT pg_sleep(20)")
            }
            await #expect(throws: CancellationError.self) { try await task.value }
            #expect(connection.state.withLock { $0.machine.cancels == nil && $0.machine.queryOnWire == nil })
            #expect(try await connection.query("SELECT 1").count == 1)
        }
    }

    /// Scenario 9: cancel while iterating a huge series: the server stops (no statement_timeout involved), the
    /// connection survives. The backend may have run megabytes ahead into the socket buffers and sits blocked
    /// writing them, so it can only act on the cancel once the client drains; the next query drains first
    /// (bounded by `cancelTimeout`, generous here because debug and sanitizer builds drain slowly).
    @Test func cancelMidStreamStopsTheServer() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("pg", registry: ResourceRegistry()) { scope in
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            let connection = try await PostgresConnection.connect(
                conninfo, in: scope, configuration: .init(cancelTimeout: .seconds(60)))
            let rows = AsyncStream<Int>.makeStream()
            let task = Task {
                for try await row in try await connection.stream("SELECT generate_series(1, 100000000)") {
                    rows.continuation.yield(try row.decode(Int.self, at: 0))
                }
            }
            let seen = await collectEvents(rows.stream) { $0.count == 1000 }.count
            try #require(seen == 1000, "the stream delivered \(seen) rows")
            task.cancel()
            await #expect(throws: CancellationError.self) { try await task.value }
            #expect(try await connection.query("SELECT 2").first?.decode(Int.self, at: 0) == 2)
            let stopped = try await TestDatabase.waitUntilNotActive(
                try #require(connection.backendPID), observer: observer)
            #expect(stopped != nil)
        }
    }

    /// Breaking out of a stream early also stops the server and leaves the connection usable.
    @Test func abandonedStreamIsDrained() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("pg", registry: ResourceRegistry()) { scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            var count = 0
            for try await _ in try await connection.stream("SELECT generate_series(1, 10000000)") {
                count += 1
                if count == 10 { break }
            }
            #expect(count == 10)
            #expect(try await connection.query("SELECT 3").first?.decode(Int.self, at: 0) == 3)
        }
    }

    /// Scenario 17: an explicit cancel from a sibling task surfaces as `CancellationError` (our own 57014).
    @Test func cancelFromSiblingTask() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("pg", registry: ResourceRegistry()) { scope in
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            let task = Task { try await connection.execute("SELECT pg_sleep(20)") }
            try await TestDatabase.waitUntilActive(try #require(connection.backendPID), observer: observer)
            connection.cancelCurrentQuery()
            await #expect(throws: CancellationError.self) { try await task.value }
            #expect(try await connection.query("SELECT 1").count == 1)
        }
    }

    /// The server's own `statement_timeout` is a failure (57014 we did not cause), not a cancellation.
    @Test func statementTimeoutIsAFailure() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("pg", registry: ResourceRegistry()) { scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            try await connection.execute("SET statement_timeout = '50ms'")
            await #expect { try await connection.execute("SELECT pg_sleep(5)") } throws: {
                ($0 as? PostgresError)?.isQueryCanceled == true
            }
            try await connection.execute("RESET statement_timeout")
        }
    }

    /// A scope deadline gives the core's deadline error, and the query is cancelled on the server.
    @Test func scopeDeadlineCancelsOnServer() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("outer", registry: ResourceRegistry()) { outer in
            let observer = try await PostgresConnection.connect(conninfo, in: outer)
            var pid: Int32 = 0
            await #expect(throws: DeadlineExceededError.self) {
                try await withResourceScope("request", deadline: .now + .milliseconds(300)) { scope in
                    let connection = try await PostgresConnection.connect(conninfo, in: scope)
                    pid = connection.backendPID ?? 0
                    try await connection.execute("SELECT pg_sleep(20)")
                }
            }
            let gone = try await TestDatabase.waitUntilNotActive(pid, observer: observer)
            #expect(gone != nil)
        }
    }

    /// Scenario 16: `close()` while a query runs cancels it on the server first and waits for that cancel (so
    /// the cancel key is released, not leaked), then finishes.
    @Test func closeDuringAQueryCancelsItOnTheServer() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let registry = ResourceRegistry()
        try await withResourceScope("close", registry: ResourceRegistry()) { scope in
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            let connection = try await PostgresConnection.connect(
                conninfo, in: nil, configuration: .init(registry: registry))
            let pid = try #require(connection.backendPID)
            let handle = connection.handle
            let task = Task { try await connection.execute("SELECT pg_sleep(20)") }
            try await TestDatabase.waitUntilActive(pid, observer: observer)
            try await connection.close()
            #expect(connection.state.withLock { $0.machine.cancelsInFlight } == 0, "close did not wait for its cancel")
            #expect(try await TestDatabase.waitUntilNotActive(pid, observer: observer) != nil)
            _ = await task.result
            await handle?.close()
        }
        #expect(registry.liveCount == 0)
    }

    /// Scenario 18: cancelling after the connection was closed is a no-op.
    @Test func cancelAfterCloseIsANoOp() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let connection = try await withResourceScope("pg", registry: ResourceRegistry()) { scope in
            try await PostgresConnection.connect(conninfo, in: scope)
        }
        connection.cancelCurrentQuery()
        connection.cancel()
        #expect(connection.isBroken)
        await #expect { try await connection.execute("SELECT 1") } throws: {
            ($0 as? PostgresError)?.code == .connection
        }
    }

    /// A closed connection keeps its closed handle (`HandleSlot`'s rule for every adapter), and every way in
    /// still answers with its own `connection` error, never a `CancellationError` a caller could take for its
    /// task's.
    @Test func aClosedConnectionKeepsItsHandleAndSaysItIsClosed() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let connection = try await withResourceScope("pg", registry: ResourceRegistry()) { scope in
            try await PostgresConnection.connect(conninfo, in: scope)
        }
        let handle = try #require(connection.handle, "the closed handle is kept")
        #expect(throws: CancellationError.self) { try handle.checkCancellation() }
        let closed: @Sendable (any Error) -> Bool = { ($0 as? PostgresError)?.code == .connection }
        await #expect(performing: { try await connection.execute("SELECT 1") }, throws: closed)
        await #expect(performing: { try await connection.query("SELECT 1") }, throws: closed)
        await #expect(performing: { _ = try await connection.stream("SELECT 1") }, throws: closed)
        await #expect(
            performing: { _ = try await connection.pipeline([PostgresStatement("SELECT 1")]) }, throws: closed)
    }
}

/// The cancel fast path: a warm control connection running `pg_cancel_backend`.
@Suite struct PostgresFastPathTests {
    @Test func fastPathCancelsOnTheServerAndKeepsTheGuard() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("fast", registry: ResourceRegistry()) { scope in
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            let control = try await PostgresConnection.connect(conninfo, in: scope)
            let channel = PostgresCancelChannel(control: control)
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            connection.useCancelChannel(channel)
            let task = Task { try await connection.execute("SELECT pg_sleep(20)") }
            try await TestDatabase.waitUntilActive(try #require(connection.backendPID), observer: observer)
            task.cancel()
            await #expect(throws: CancellationError.self) { try await task.value }
            #expect(
                try await TestDatabase.waitUntilNotActive(try #require(connection.backendPID), observer: observer)
                    != nil)
            try await until("the fast path's outcome", connection.cancelStatistics.updates()) {
                $0.fastPath + $0.cancelRequests > 0
            }
            #expect(connection.cancelStatistics.snapshot.fastPath == 1)
            #expect(connection.cancelStatistics.snapshot.cancelRequests == 0)
            // Late cancels through the fast path never hit a follow-up query.
            var stray = 0
            for _ in 0..<300 {
                let short = Task { try await connection.execute("SELECT pg_sleep(0.001)") }
                try await Task.sleep(for: .microseconds(Int.random(in: 0...3_000)))
                short.cancel()
                _ = await short.result
                do { _ = try await connection.query("SELECT 1") } catch let error as PostgresError
                    where error.isQueryCanceled
                { stray += 1 }
            }
            #expect(stray == 0)
            #expect(connection.cancelStatistics.snapshot.fastPath > 1)
        }
    }

    /// A control connection whose role may not cancel the target (no `pg_signal_backend`, another role):
    /// the fast path does not deliver, and the *same* cancel goes out as a cancel request at once.
    @Test func aFastPathWithoutPrivilegeFallsBackForThatSameCancel() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("weak", registry: ResourceRegistry()) { scope in
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            try await observer.execute(
                "DO $$ BEGIN CREATE ROLE rk_weak LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$")
            let weak = try await PostgresConnection.connect(
                conninfo.replacingOccurrences(of: "user=postgres", with: "user=rk_weak"), in: scope)
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            connection.useCancelChannel(PostgresCancelChannel(control: weak))
            let pid = try #require(connection.backendPID)
            let task = Task { try await connection.execute("SELECT pg_sleep(20)") }
            do {
                try await TestDatabase.waitUntilActive(pid, observer: observer)
            } catch {
                // Seen once (a full parallel run, right after the cluster started): say what the query did.
                task.cancel()
                Issue.record("the query never showed as active; its task ended with \(await task.result)")
                throw error
            }
            task.cancel()
            await #expect(throws: CancellationError.self) { try await task.value }
            #expect(try await TestDatabase.waitUntilNotActive(pid, observer: observer) != nil, "the cancel was lost")
            try await until("the fallback", connection.cancelStatistics.updates()) { $0.cancelRequests > 0 }
            let statistics = connection.cancelStatistics.snapshot
            #expect(
                statistics.fastPath == 0 && statistics.fastPathFellBack == 1 && statistics.cancelRequests == 1,
                "\(statistics)")
            #expect(try await connection.query("SELECT 1").count == 1)
        }
    }

    @Test func poolUsesTheFastPathAndFallsBackWithoutIt() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let registry = ResourceRegistry()
        let pool = try PostgresPool(conninfo: conninfo, maxConnections: 2, registry: registry)
        let marker = "rk-fast-path-\(UInt32.random(in: 0...UInt32.max))"
        let task = Task {
            try await pool.withConnection { try await $0.execute("SELECT pg_sleep(20), $1::text", [marker]) }
        }
        try await withResourceScope("observer", registry: ResourceRegistry()) { scope in
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            let running = try await PostgresActivityProbe(observer: observer).waitUntil(
                .active(.running("pg_sleep(20), $1")), within: .seconds(10))
            try #require(running != nil, "the query never ran")
        }
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        // The task returned at once; the control statement reports its outcome just after.
        try await until("the fast path's outcome", pool.cancelStatistics.updates()) {
            $0.fastPath + $0.cancelRequests > 0
        }
        #expect(pool.cancelStatistics.snapshot.fastPath == 1)
        #expect(pool.cancelStatistics.snapshot.cancelRequests == 0)
        let one = try await pool.withConnection { try await $0.query("SELECT 1")[0].decode(Int.self, at: 0) }
        #expect(one == 1)
        await pool.shutdown()
        #expect(registry.liveCount == 0)
    }
}
