import PostgresAdapter
import PostgresTestSupport
import ResourceKit
import ResourceKitTesting
import TestSupport
import Testing

/// A scope reaches what it borrows (Docs/Architecture.md, "Three levels of cancellation"): a pooled connection, a
/// connection an outer scope owns and a wait for a free connection obey the calling scope's deadline and
/// `cancel()`, against the real server directly and through PgBouncer in transaction mode. The query is gone
/// from the server (`pg_stat_activity` on the server itself) and the connection is cleaned and kept.
@Suite(.serialized) struct BorrowingScopePostgresTests {
    static let deadline: Duration = .milliseconds(300)
    /// The deadline is not carried to the server as `statement_timeout` here: the server would end the statement
    /// at the same instant by itself, and these tests are about the client reaching it (the cancel request).
    static let session = PostgresSessionOptions(carriesDeadlineToServer: false)
    // The statements sleep 30 s, a hundred times the deadline. With 3 s, CI once saw `execute` return its result:
    // the statement completed before the deadline's cancel reached it (a body that completed stands, as
    // documented), which a stall of about 3 s explains. Now only a cancel that never arrives (or one more than 5 s
    // late, the watchdog's bound) fails them, and a failure says how late the deadlines' thread ran.

    /// The request's scope: its deadline (or `cancel()` from elsewhere) ends the body; returns what it threw
    /// and how long it ran. `nil` when nothing ended it within the bound (the test fails, it does not hang).
    static func runRequest(
        deadline: Duration?, cancelledBy cancel: (@Sendable (ResourceScope) async throws -> Void)? = nil,
        _ body: @escaping @Sendable () async throws -> Void
    ) async throws -> (error: (any Error)?, took: Duration)? {
        let started = ContinuousClock.now
        let scopes = AsyncStream<ResourceScope>.makeStream()
        let task = Task {
            try await withResourceScope("request", deadline: deadline.map { .now + $0 }) { scope in
                scopes.continuation.yield(scope)
                try await body()
            }
        }
        if let cancel {
            var iterator = scopes.stream.makeAsyncIterator()
            if let scope = await iterator.next() { try await cancel(scope) }
        }
        guard let result = await outcome(of: task, within: (deadline ?? .zero) + TimingBound.singleShot) else {
            return nil
        }
        return (result.failure, ContinuousClock.now - started)
    }

    /// What ended a request, how long it took, and how punctual the deadlines' thread has been (a machine that
    /// stalled for seconds is then told apart from a cancel that was lost).
    static func describe(_ ended: (error: (any Error)?, took: Duration)) -> Comment {
        "\(String(describing: ended.error)) after \(ended.took); \(DeadlineTimers.shared.health)"
    }

    @Test(arguments: [ProductionShapes.Setup.scramTCP, .pgbouncer])
    func aPooledQueryObeysTheBorrowingScopesDeadline(_ setup: ProductionShapes.Setup) async throws {
        let shapes = try await ProductionShapes.shared()
        let registry = ResourceRegistry()
        let pool = try PostgresPool(
            conninfo: shapes.conninfo(setup), maxConnections: 1, registry: registry, session: Self.session)
        try await withResourceScope("observer", registry: ResourceRegistry()) { scope in
            let activity = try await ServerActivity(servers: shapes.servers(behind: setup), in: scope)
            _ = try await pool.withConnection { try await $0.query("SELECT 1") }
            let marker = statementMarker("borrowed-deadline")
            let ended = try #require(
                try await Self.runRequest(deadline: Self.deadline) {
                    _ = try await pool.withConnection { try await $0.query("SELECT pg_sleep(30) /* \(marker) */") }
                }, "the pooled query ignored the scope's deadline")
            #expect(ended.error is DeadlineExceededError, Self.describe(ended))
            #expect(ended.took >= Self.deadline)
            #expect(
                try await activity.waitUntilStopped(marker, within: TimingBound.singleShot) != nil,
                "the query still runs on the server")
            // Cleaned and kept: the next lessee gets the same (one) connection, and it works.
            let answer = try await pool.withConnection {
                try await $0.query("SELECT 41 + 1").first?.decode(Int.self, at: 0)
            }
            #expect(answer == 42)
            #expect(pool.openCount == 1)
        }
        await pool.shutdown()
        #expect(registry.liveCount == 0)
    }

    @Test func aConnectionAnOuterScopeOwnsObeysTheInnerScopesDeadline() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let registry = ResourceRegistry()
        try await withResourceScope("connection owner", registry: registry) { owner in
            let connection = try await PostgresConnection.connect(
                conninfo, in: owner, configuration: .init(session: Self.session))
            let observer = try await PostgresConnection.connect(conninfo, in: owner)
            let pid = try #require(connection.backendPID)
            let ended = try #require(
                try await Self.runRequest(deadline: Self.deadline) {
                    _ = try await connection.query("SELECT pg_sleep(30)")
                }, "the query on the outer scope's connection ignored the inner scope's deadline")
            #expect(ended.error is DeadlineExceededError, Self.describe(ended))
            let stopped = try await TestDatabase.waitUntilNotActive(
                pid, observer: observer, within: TimingBound.singleShot)
            #expect(stopped != nil, "the query still runs on the server")
            #expect(!owner.isCancelled)
            #expect(try await connection.query("SELECT 1").count == 1, "the connection lives on")
        }
        #expect(registry.liveCount == 0)
    }

    /// Every kind of operation on a connection an outer scope owns, inside a deadline scope: no API of its own is
    /// needed, each goes through the core's waits and operations.
    @Test(arguments: ["execute", "stream", "copyOut", "pipeline", "transaction"])
    func everyOperationObeysTheBorrowingScopesDeadline(api: String) async throws {
        let conninfo = try await TestDatabase.conninfo()
        let registry = ResourceRegistry()
        try await withResourceScope("connection owner", registry: registry) { owner in
            let connection = try await PostgresConnection.connect(
                conninfo, in: owner, configuration: .init(session: Self.session))
            let observer = try await PostgresConnection.connect(conninfo, in: owner)
            let pid = try #require(connection.backendPID)
            let ended = try #require(
                try await Self.runRequest(deadline: Self.deadline) {
                    switch api {
                    case "execute": try await connection.execute("SELECT pg_sleep(30)")
                    case "stream": for try await _ in try await connection.stream("SELECT pg_sleep(30)") {}
                    case "copyOut":
                        for try await _ in try await connection.copyOut("COPY (SELECT pg_sleep(30)) TO STDOUT") {}
                    case "pipeline":
                        let statements = [PostgresStatement("SELECT 1"), PostgresStatement("SELECT pg_sleep(30)")]
                        _ = try await connection.pipeline(statements)
                    default: try await connection.withTransaction { try await $0.execute("SELECT pg_sleep(30)") }
                    }
                }, "\(api) ignored the borrowing scope's deadline")
            #expect(ended.error is DeadlineExceededError, "\(api): \(Self.describe(ended))")
            let stopped = try await TestDatabase.waitUntilNotActive(
                pid, observer: observer, within: TimingBound.singleShot)
            #expect(stopped != nil, "\(api): the statement still runs on the server")
            #expect(try await connection.query("SELECT 1").count == 1, "\(api): the connection lives on")
        }
        #expect(registry.liveCount == 0)
    }

    @Test func aWaitForAFreeConnectionObeysTheScopesDeadline() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let registry = ResourceRegistry()
        let pool = try PostgresPool(conninfo: conninfo, maxConnections: 1, registry: registry)
        let holding = AsyncStream<Void>.makeStream()
        let release = OneShotEvent()
        let holder = Task {
            try await pool.withConnection { _ in
                holding.continuation.yield()
                try await release.wait()
            }
        }
        var iterator = holding.stream.makeAsyncIterator()
        _ = await iterator.next()
        let ended = try #require(
            try await Self.runRequest(deadline: .milliseconds(500)) {
                _ = try await pool.withConnection { try await $0.query("SELECT 1") }
            }, "the waiter ignored the scope's deadline")
        #expect(ended.error is DeadlineExceededError, Self.describe(ended))
        #expect(pool.waiterCount == 0, "the waiter left the queue")
        release.set()
        try await holder.value
        #expect(try await pool.withConnection { try await $0.query("SELECT 1").count } == 1)
        await pool.shutdown()
        #expect(registry.liveCount == 0)
    }

    @Test func cancelOfTheBorrowingScopeFromAnotherTaskReachesAPooledQuery() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let registry = ResourceRegistry()
        let pool = try PostgresPool(conninfo: conninfo, maxConnections: 1, registry: registry)
        try await withResourceScope("observer", registry: ResourceRegistry()) { scope in
            let activity = try await ServerActivity(servers: [conninfo], in: scope)
            let marker = statementMarker("borrowed-cancel")
            let ended = try #require(
                try await Self.runRequest(
                    deadline: nil,
                    cancelledBy: { request in
                        _ = try await activity.waitUntilActive(marker)
                        request.cancel()
                    }
                ) {
                    _ = try await pool.withConnection { try await $0.query("SELECT pg_sleep(30) /* \(marker) */") }
                }, "scope.cancel() did not reach the pooled query")
            #expect(ended.error is CancellationError, Self.describe(ended))
            #expect(try await activity.waitUntilStopped(marker, within: TimingBound.singleShot) != nil)
            #expect(try await pool.withConnection { try await $0.query("SELECT 1").count } == 1)
            #expect(pool.openCount == 1)
        }
        await pool.shutdown()
        #expect(registry.liveCount == 0)
    }
}
