public import PostgresAdapter
public import ResourceKit
import ResourceKitTesting

/// A pool's only connection, leased (after a query) by a task that keeps it until it is let go: whatever is asked
/// of the pool meanwhile queues (leases, shared statements).
public struct HeldConnection: Sendable {
    /// Set to let the connection go (``letGo()`` sets it and waits for the holder).
    public let release: OneShotEvent
    /// The task that holds the connection.
    public let holder: Task<Void, any Error>

    /// Leases `pool`'s only connection and returns once it is leased (an event, not a pause).
    public static func hold(theOnlyConnectionOf pool: PostgresPool) async throws -> HeldConnection {
        let release = OneShotEvent()
        let updates = pool.occupancyUpdates()
        // Owned: the caller lets it go (``letGo()``) and so awaits it.
        let holder = Task {
            try await pool.withConnection { connection in
                _ = try await connection.query("SELECT 1")
                try await release.wait()
            }
        }
        try await until("the connection is leased", updates) { $0.open == 1 && $0.idle == 0 }
        return HeldConnection(release: release, holder: holder)
    }

    /// Lets the connection go and waits until the holder gave it back.
    public func letGo() async throws {
        release.set()
        try await holder.value
    }
}
