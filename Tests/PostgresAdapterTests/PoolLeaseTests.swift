import PostgresTestSupport
import ResourceKit
import ResourceKitTesting
import Synchronization
import TestSupport
import Testing

@testable import PostgresAdapter

/// How a lease gets its connection: an idle one is looked at first, one handed over from a lessee is not.
@Suite struct PoolLeaseTests {
    /// A pool of one whose connection a task holds (after a query) until `letGo` is set.
    static func poolOfOneHeld() async throws -> (PostgresPool, ResourceRegistry, OneShotEvent, Task<Void, any Error>) {
        let conninfo = try await TestDatabase.conninfo()
        let registry = ResourceRegistry()
        let pool = try PostgresPool(conninfo: conninfo, maxConnections: 1, registry: registry, cancelFastPath: false)
        let held = try await HeldConnection.hold(theOnlyConnectionOf: pool)
        return (pool, registry, held.release, held.holder)
    }

    /// A connection returned clean while a lessee is queued goes straight to that lessee, without the zero-timeout
    /// look an idle connection gets (it answered a moment ago); a connection that sat idle is looked at.
    @Test func aConnectionHandedToAQueuedLesseeIsNotLookedAt() async throws {
        let (pool, registry, letGo, holder) = try await Self.poolOfOneHeld()
        let queued = Task {
            try await pool.withConnection { try await $0.query("SELECT 2")[0].decode(Int.self, at: 0) }
        }
        try await until("a lessee is queued", pool.occupancyUpdates()) { $0.waiters == 1 }
        letGo.set()
        try await holder.value
        #expect(try await queued.value == 2)
        #expect(pool.idleLooks.load(ordering: .relaxed) == 0, "the handed-over connection was looked at")

        #expect(pool.idleCount == 1)
        _ = try await pool.withConnection { try await $0.query("SELECT 3") }
        #expect(pool.idleLooks.load(ordering: .relaxed) == 1, "the idle connection was not looked at")
        await pool.shutdown()
        #expect(registry.liveCount == 0)
    }

    /// A lease that must queue inside a scope cancelled already is refused at once: the cancel reaches it before
    /// it asks the pool (while it joins the scope), and the pool keeps the reason for it instead of parking it.
    /// The task itself is not cancelled, so nothing else would stop the wait until the holder lets go.
    @Test func aLeaseInACancelledScopeIsRefusedBeforeItQueues() async throws {
        let (pool, registry, letGo, holder) = try await Self.poolOfOneHeld()
        let refused = Task {
            try await withResourceScope("cancelled first", registry: registry) { scope in
                scope.cancel()
                do {
                    _ = try await pool.withConnection { try await $0.query("SELECT 2") }
                    return "leased"
                } catch {
                    return error is CancellationError ? "refused" : "\(error)"
                }
            }
        }
        // Nil when it parked instead (the watchdog then cancels it, after a bound far above a working path).
        let ended = await outcome(of: refused)
        letGo.set()
        try await holder.value
        #expect(ended != nil, "the lease parked in the queue of a scope cancelled before it asked")
        #expect(try ended?.get() == "refused")
        #expect(pool.waiterCount == 0)
        #expect(try await pool.withConnection { try await $0.query("SELECT 3").count } == 1)
        await pool.shutdown()
        #expect(registry.liveCount == 0)
    }
}
