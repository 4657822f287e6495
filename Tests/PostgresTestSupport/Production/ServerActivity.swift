import PostgresAdapter
import PostgresActivity
public import ResourceKit
import TestSupport

/// `pg_stat_activity` on the real servers behind a setup (through direct connections, never through the
/// pooler or balancer under test): finds the backends running a statement that carries a marker comment.
public struct ServerActivity: Sendable {
    private let observers: [PostgresConnection]

    /// Connects one observer per server, in `scope`.
    public init(servers: [String], in scope: ResourceScope) async throws {
        var observers: [PostgresConnection] = []
        for server in servers { observers.append(try await PostgresConnection.connect(server, in: scope)) }
        self.observers = observers
    }

    /// The `(server index, pid)` of every backend actively running a statement containing `marker`.
    public func active(_ marker: String) async throws -> [(server: Int, pid: Int32)] {
        var found: [(Int, Int32)] = []
        for (index, observer) in observers.enumerated() {
            for pid in try await PostgresActivityProbe(observer: observer).backends(.running(marker)) {
                found.append((index, pid))
            }
        }
        return found
    }

    /// Every `(server index, pid)` actively running anything but our observers.
    public func allActive() async throws -> [(server: Int, pid: Int32)] {
        var found: [(Int, Int32)] = []
        for (index, observer) in observers.enumerated() {
            let rows = try await observer.query(
                """
                SELECT pid FROM pg_stat_activity WHERE state = 'active' AND backend_type = 'client backend' AND \
                pid <> pg_backend_pid()
                """
            )
            for row in rows { found.append((index, try row.decode(Int32.self, at: 0))) }
        }
        return found
    }

    /// Waits until a backend runs `marker` (so a cancel lands mid-query); returns where.
    public func waitUntilActive(_ marker: String, timeout: Duration = .seconds(10)) async throws -> (
        server: Int, pid: Int32
    ) {
        var first: (server: Int, pid: Int32)?
        _ = try await PostgresActivityProbe.poll(every: .milliseconds(1), within: timeout) {
            first = try await active(marker).first
            return first != nil
        }
        guard let first else {
            throw PostgresError(.connection, "no backend ran the marked statement within \(timeout)")
        }
        return first
    }

    /// Waits until no backend runs `marker`; returns how long that took, or `nil` if it still ran after `bound`.
    public func waitUntilStopped(_ marker: String, within bound: Duration = .seconds(1)) async throws -> Duration? {
        try await PostgresActivityProbe.poll(every: .milliseconds(1), within: bound) {
            try await active(marker).isEmpty
        }
    }
}

/// A marker for one statement: `/* rk-<word>-<random> */` goes into its text.
public func statementMarker(_ word: String) -> String {
    "rk-\(word)-\(UInt64.random(in: 0...UInt64.max))"
}
