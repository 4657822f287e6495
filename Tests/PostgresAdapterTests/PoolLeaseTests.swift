import PostgresTestSupport
import ResourceKit
import ResourceKitTesting
import Synchronization
import TestSupport
import Testing

@testable import PostgresAdapter

/// How a lease gets its connection: an idle one is looked at first, one handed over from a lessee is not.
@Suite struct PoolLeaseTests {
    /// A connection returned clean while a lessee is queued goes straight to that lessee, without the zero-timeout
    /// look an idle connection gets (it answered a moment ago); a connection that sat idle is looked at.
    @Test func aConnectionHandedToAQueuedLesseeIsNotLookedAt() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let registry = ResourceRegistry()
        let pool = try PostgresPool(conninfo: conninfo, maxConnections: 1, registry: registry, cancelFastPath: false)
        let letGo = OneShotEvent()
        let holder = Task {
            try await pool.withConnection { connection in
                _ = try await connection.query("SELECT 1")
                try await letGo.wait()
            }
        }
        try await until("the connection is leased", pool.occupancyUpdates()) { $0.open == 1 && $0.idle == 0 }
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
}
