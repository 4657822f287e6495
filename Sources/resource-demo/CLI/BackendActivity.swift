import PostgresAdapter
import ResourceKit

/// What `pg_stat_activity` says about one backend, seen from a second connection: the server-side
/// confirmation the demo and the benchmark report.
enum BackendActivity {
    /// The `state` of `pid` (`active`, `idle`, ...), or nil when the backend is gone.
    static func state(of pid: Int32, observer: PostgresConnection) async throws -> String? {
        try await observer.query("SELECT state FROM pg_stat_activity WHERE pid = $1", [Int(pid)]).first?.decode(String?.self, at: 0)
    }

    /// Polls until `pid` is not active, or until `limit` passed; returns the state seen last (`gone` when
    /// the backend has ended) and when it was seen.
    static func waitUntilNotActive(
        _ pid: Int32,
        observer: PostgresConnection,
        limit: Duration? = nil
    ) async throws -> (state: String, at: ContinuousClock.Instant) {
        let start = ContinuousClock.now
        while true {
            let state = try await self.state(of: pid, observer: observer) ?? "gone"
            if state != "active" || limit.map({ ContinuousClock.now - start >= $0 }) == true { return (state, .now) }
        }
    }
}
