import Dispatch
import PostgresTestSupport
import ResourceKit
import TestSupport
import Testing

@testable import PostgresAdapter

/// The runtime libraries' async functions are `nonisolated(nonsending)`: they run on their caller's executor
/// instead of hopping to the generic one (Docs/Architecture.md, "Where code runs"). A notice handler runs inside
/// the query's own code (the connection delivers notices as it reads the results), so where it runs says where
/// the query ran.
@Suite struct WhereCodeRunsTests {
    /// A query that parks on the reactor (50 ms) before its notice, so that the code after a real suspension is
    /// checked too.
    static let notice = "DO $$ BEGIN PERFORM pg_sleep(0.05); RAISE NOTICE 'here'; END $$"

    /// A serial executor over a serial dispatch queue: whether code runs on it is a queue-specific value, which
    /// (unlike a thread's identity) nothing else can have.
    final class QueueExecutor: SerialExecutor {
        static let key = DispatchSpecificKey<Bool>()
        let queue: DispatchQueue

        init() {
            queue = DispatchQueue(label: "where-code-runs")
            queue.setSpecific(key: Self.key, value: true)
        }

        func enqueue(_ job: consuming ExecutorJob) {
            let job = UnownedJob(job)
            queue.async { job.runSynchronously(on: self.asUnownedSerialExecutor()) }
        }

        static var isCurrent: Bool { DispatchQueue.getSpecific(key: key) == true }
    }

    /// The caller: an actor on that executor. Its closures use its state (`queries`), so they are isolated to it.
    actor Caller {
        let executor = QueueExecutor()
        var queries = 0
        var lookedBeforeParking = -1
        nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

        func queryThroughAConnectionAndAPool(_ conninfo: String, onNotice: @escaping @Sendable (PostgresNotice) -> Void)
            async throws -> (queries: Int, lookedBeforeParking: Int, endedOnTheActor: Bool)
        {
            try await withResourceScope("where", registry: ResourceRegistry()) { scope in
                let connection = try await PostgresConnection.connect(
                    conninfo, in: scope, configuration: .init(onNotice: onNotice))
                try await connection.execute(WhereCodeRunsTests.notice)
                queries += 1
                // On an actor a query parks at once: a look before parking would hold the actor.
                lookedBeforeParking = connection.answerLooks.load(ordering: .relaxed)
            }
            let pool = try PostgresPool(
                conninfo: conninfo, maxConnections: 1, registry: ResourceRegistry(), onNotice: onNotice)
            do {
                _ = try await pool.withConnection { connection in
                    try await connection.execute(WhereCodeRunsTests.notice)
                    queries += 1
                }
            } catch {
                await pool.shutdown()
                throw error
            }
            await pool.shutdown()
            return (queries, lookedBeforeParking, QueueExecutor.isCurrent)
        }
    }

    @Test func aQueryFromAnActorRunsOnThatActor() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let seen = Locked<[String]>([])
        let caller = try await Caller().queryThroughAConnectionAndAPool(conninfo) { notice in
            let here = QueueExecutor.isCurrent
            seen.withLock { $0.append("\(notice.message) \(here ? "on" : "off") the caller's executor") }
        }
        #expect(caller.queries == 2 && caller.endedOnTheActor)
        #expect(caller.lookedBeforeParking == 0, "a query on an actor looked at its socket before parking")
        // Both notices were delivered on the actor's executor: the connection's and the pool's code ran there.
        let expected = "here on the caller's executor"
        #expect(seen.withLock { $0 } == [expected, expected])
    }
}
