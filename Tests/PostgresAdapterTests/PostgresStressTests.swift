import PostgresTestSupport
import ResourceKit
import ResourceKitTesting
import TestSupport
import Testing

@testable import PostgresAdapter

@Suite(.serialized) struct PostgresStressTests {
    /// Must show (scenario 6): 2,000 iterations of (start a short query, cancel it at a random moment within
    /// 0 to 5 ms, then `SELECT 1` on the same connection): zero 57014 on the follow-ups, zero lost connections.
    @Test func lateCancelStress() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await exclusively {
            var outcomes = (completed: 0, cancelled: 0, followUp57014: 0, otherErrors: 0)
            try await withResourceScope("stress", registry: ResourceRegistry()) { scope in
                let connection = try await PostgresConnection.connect(conninfo, in: scope)
                for _ in 0..<2_000 {
                    let task = Task { try await connection.execute("SELECT pg_sleep(0.002)") }
                    try await Task.sleep(for: .microseconds(Int.random(in: 0...5_000)))
                    task.cancel()
                    switch await task.result {
                    case .success: outcomes.completed += 1
                    case .failure(let error) where error is CancellationError: outcomes.cancelled += 1
                    case .failure: outcomes.otherErrors += 1
                    }
                    do {
                        _ = try await connection.query("SELECT 1")
                    } catch let error as PostgresError where error.isQueryCanceled {
                        outcomes.followUp57014 += 1
                    }
                }
                #expect(!connection.isBroken)
            }
            #expect(outcomes.followUp57014 == 0)
            #expect(outcomes.otherErrors == 0)
            #expect(outcomes.completed + outcomes.cancelled == 2_000)
            print(
                """
                late-cancel stress: \(outcomes.completed) completed, \(outcomes.cancelled) cancelled, \
                \(outcomes.followUp57014) stray 57014, \(outcomes.otherErrors) other errors
                """
            )
        }
    }

    /// Scenario 11: pool of N, 3N waiters, all cancelled: nothing leaked or stranded, pool healthy.
    @Test func poolWaitersCancelled() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await exclusively {
            let registry = ResourceRegistry()
            let pool = try PostgresPool(conninfo: conninfo, maxConnections: 4, registry: registry)
            let holders = Task {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<4 {
                        group.addTask { () async throws -> Void in
                            _ = try await pool.withConnection { try await $0.execute("SELECT pg_sleep(20)") }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            try await until("4 connections leased", pool.occupancyUpdates()) { $0.open == 4 && $0.idle == 0 }
            let waiters = Task {
                await withTaskGroup(of: Bool.self) { group in
                    for _ in 0..<12 {
                        group.addTask {
                            do {
                                try await pool.withConnection { _ in }
                                return false
                            } catch { return error is CancellationError }
                        }
                    }
                    var cancelled = 0
                    for await wasCancelled in group where wasCancelled { cancelled += 1 }
                    return cancelled
                }
            }
            try await until("12 waiters parked", pool.occupancyUpdates()) { $0.waiters == 12 }
            waiters.cancel()
            #expect(await waiters.value == 12)
            #expect(pool.waiterCount == 0)
            holders.cancel()
            await #expect(throws: CancellationError.self) { try await holders.value }
            #expect(pool.openCount <= 4)
            // Healthy: every connection works again (cancelled queries drained first).
            let ones = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        try await pool.withConnection { try await $0.query("SELECT 1")[0].decode(Int.self, at: 0) }
                    }
                }
                var sum = 0
                for try await one in group { sum += one }
                return sum
            }
            #expect(ones == 8)
            await pool.shutdown()
            #expect(registry.liveCount == 0)
        }
    }
}
