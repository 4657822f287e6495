public import EmbeddedPostgres
import Foundation
public import PostgresAdapter
import PostgresActivity
import ResourceKit
import TestSupport

/// The server the Postgres tests use: `RESOURCEKIT_TEST_POSTGRES` (a conninfo or URL) if set, else one
/// embedded throwaway cluster per test process, stopped at exit. Never skipped: a missing server fails.
public enum TestDatabase {
    /// The test fixtures' clusters live in `/tmp/resourcekit-test-pg-*`, apart from the demo's
    /// (`resourcekit-pg-*`), which a test finds by its directory.
    public static let directoryPrefix = "resourcekit-test-pg-"

    private static let embedded = Locked<EmbeddedPostgres?>(nil)
    /// Started by whichever test asks first, in a task of its own that must not borrow that test's scope (a
    /// deadline or cancel of one test would otherwise end the cluster's start for every test).
    private static let startup = Task<String, any Error> {
        try await withoutResourceScope { try await start() }
    }

    private static func start() async throws -> String {
        if let configured = ProcessInfo.processInfo.environment["RESOURCEKIT_TEST_POSTGRES"], !configured.isEmpty {
            return configured
        }
        TestFixtures.claim()
        // initdb is CPU-heavy for a few seconds: keep it away from the timing-sensitive tests.
        let server = try await exclusively { try await EmbeddedPostgres.start(.init(directoryPrefix: directoryPrefix)) }
        embedded.withLock { $0 = server }
        server.stopOnTerminationSignals()  // Ctrl-C on `swift test` leaves no cluster behind
        atexit { TestDatabase.stopAtExit() }
        return server.conninfo
    }

    static func stopAtExit() {
        embedded.withLock { $0 }?.stopBlocking()
    }

    /// The conninfo of the test server.
    public static func conninfo() async throws -> String {
        try await startup.value
    }

    /// A separate, private cluster (for tests that kill the server).
    public static func privateCluster() async throws -> EmbeddedPostgres {
        TestFixtures.claim()
        return try await EmbeddedPostgres.start(.init(directoryPrefix: directoryPrefix))
    }

    /// What `pg_stat_activity` says about `pid`: its `state` (`active`, `idle`, ...), or nil if gone.
    public static func backendState(_ pid: Int32, observer: PostgresConnection) async throws -> String? {
        try await PostgresActivityProbe(observer: observer).state(of: pid)
    }

    /// Waits (polling the observer, bounded: `TimingBound.singleShot` unless given) until `pid` is no longer
    /// active; returns how long it took, or `nil` at the bound.
    public static func waitUntilNotActive(
        _ pid: Int32, observer: PostgresConnection, within bound: Duration? = nil
    ) async throws -> Duration? {
        try await PostgresActivityProbe(observer: observer).waitUntil(
            .notActive(.pid(pid)), within: bound ?? TimingBound.singleShot)
    }

    /// Waits until `pid` runs a query (so a cancel lands mid-query, not before it was sent).
    public static func waitUntilActive(_ pid: Int32, observer: PostgresConnection) async throws {
        guard
            try await PostgresActivityProbe(observer: observer).waitUntil(.active(.pid(pid)), within: .seconds(10))
                != nil
        else {
            throw PostgresError(.connection, "backend never became active")
        }
    }

    /// The pid of the backend whose query contains `marker`, once it is active (polling `pg_stat_activity`, the
    /// only view of another process's query; bounded).
    public static func activeBackend(
        running marker: String, observer: PostgresConnection, within bound: Duration = .seconds(60)
    ) async throws -> Int32 {
        let probe = PostgresActivityProbe(observer: observer, pollInterval: .milliseconds(10))
        let found = Locked<Int32?>(nil)
        _ = try await PostgresActivityProbe.poll(every: probe.pollInterval, within: bound) {
            let pid = try await probe.backends(.running(marker)).first
            found.withLock { $0 = pid }
            return pid != nil
        }
        guard let pid = found.withLock({ $0 }) else {
            throw PostgresError(.connection, "no backend ran the query marked \(marker)")
        }
        return pid
    }
}
