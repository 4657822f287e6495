import PostgresTestSupport
import ResourceKit
import ResourceKitIO
import ResourceKitTesting
import Synchronization
import TestSupport
import Testing

@testable import PostgresAdapter

/// Queries from tasks that prefer the reactor as their executor (Docs/Architecture.md, "The reactor as a task
/// executor"), against a real server: they stay on the reactor's thread through leases and waits. (A cancel from
/// there: `PostgresCancellationTests.cancelRunningSleepForEveryAPI`.)
@Suite(.timeLimit(.minutes(2))) struct ReactorExecutorQueryTests {
    @Test func queriesThroughAPoolStayOnTheReactorsThread() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let registry = ResourceRegistry()
        let pool = try PostgresPool(conninfo: conninfo, maxConnections: 4, registry: registry)
        let reactor = IOReactor.shared
        let (answers, offThread) = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            for task in 0..<16 {
                group.addTask(executorPreference: reactor) {
                    var (answers, offThread) = (0, 0)
                    for index in 0..<10 {
                        let value = task * 100 + index
                        let answer = try await pool.withConnection { connection in
                            let answer = try await connection.query("SELECT $1::int", [value])[0].decode(
                                Int.self, at: 0)
                            if !reactor.isCurrentThread { offThread += 1 }
                            return answer
                        }
                        if answer == value { answers += 1 }
                    }
                    return (answers, offThread)
                }
            }
            return try await group.reduce((0, 0)) { ($0.0 + $1.0, $0.1 + $1.1) }
        }
        #expect(answers == 160)
        #expect(offThread == 0, "a query resumed off the reactor's thread")
        await pool.shutdown()
        #expect(registry.liveCount == 0)
    }

    /// The look before parking, as a decision: never on an actor (the query runs on it, and a look would hold
    /// it), never on the reactor's thread, where a look would hold back every other readiness event, and never
    /// while other queries are in flight or about to be.
    @Test func aWaitOnTheReactorsThreadNeverLooksBeforeParking() {
        // (first wait, the caller's own, on an actor, on the reactor's thread, others busy) -> looks
        let cases: [(Bool, Bool, Bool, Bool, Bool, Bool)] = [
            (true, true, false, true, false, false),
            (true, true, false, true, true, false),
            (true, true, false, false, false, true),
            (true, true, true, false, false, false),
            (true, true, false, false, true, false),
            (false, true, false, false, false, false),
            (true, false, false, false, false, false),
        ]
        for (first, own, onActor, onReactor, busy, expected) in cases {
            let looks = PostgresConnection.looksAgain(
                firstWait: first, callersOwn: own, onActor: onActor, onReactorThread: onReactor, othersAreBusy: busy)
            let context = "first \(first), own \(own), on an actor \(onActor), on reactor \(onReactor), busy \(busy)"
            #expect(looks == expected, Comment(rawValue: context))
        }
    }
}
