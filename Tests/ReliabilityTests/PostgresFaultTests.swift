import Foundation
import Glibc
import PostgresTestSupport
import ResourceKit
import ResourceKitTesting
import TestSupport
import Testing

@testable import PostgresAdapter

@Suite struct PostgresFaultTests {
    /// Scenario 15: a frozen backend (SIGSTOP) while a cancel is sent: the task still returns at once; the
    /// cancelled query can never drain, so the next operation gives up after `cancelTimeout` and the
    /// connection is discarded, never reused.
    @Test func frozenBackendIsBoundedAndDiscarded() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("frozen", registry: ResourceRegistry()) { scope in
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            let connection = try await PostgresConnection.connect(
                conninfo, in: scope, configuration: .init(cancelTimeout: .milliseconds(500)))
            let pid = try #require(connection.backendPID)
            let task = Task { try await connection.execute("SELECT pg_sleep(20)") }
            try await TestDatabase.waitUntilActive(pid, observer: observer)
            #expect(kill(pid, SIGSTOP) == 0)
            defer { kill(pid, SIGCONT) }
            await Self.expectCancelledThenDiscarded(task, connection)
        }
    }

    /// Scenario 14: a deaf cancel target (the postmaster frozen with SIGSTOP, so the cancel request connects and
    /// never gets an answer). The task still returns at once; the connection's next operation gives up after
    /// `cancelTimeout` and the connection is discarded.
    @Test func deafCancelTargetIsBounded() async throws {
        let server = try await TestDatabase.privateCluster()
        let pidFile = try String(contentsOfFile: server.dataDirectory + "/data/postmaster.pid", encoding: .utf8)
        let postmaster = try #require(pid_t(pidFile.split(separator: "\n").first.map(String.init) ?? ""))
        do {
            try await withResourceScope("deaf", registry: ResourceRegistry()) { scope in
                let observer = try await PostgresConnection.connect(server.conninfo, in: scope)
                let connection = try await PostgresConnection.connect(
                    server.conninfo, in: scope, configuration: .init(cancelTimeout: .milliseconds(500)))
                let task = Task { try await connection.execute("SELECT pg_sleep(20)") }
                try await TestDatabase.waitUntilActive(try #require(connection.backendPID), observer: observer)
                #expect(kill(postmaster, SIGSTOP) == 0)
                await Self.expectCancelledThenDiscarded(task, connection)
                kill(postmaster, SIGCONT)
            }
        } catch {
            kill(postmaster, SIGCONT)
            await server.stop()
            throw error
        }
        kill(postmaster, SIGCONT)
        await server.stop()
    }

    /// Issue #11, point 5: behind a pool, the next caller never pays for someone else's cancel. A lessee's
    /// query is cancelled while its backend is frozen (the cancel cannot take effect); the next lessee is not
    /// handed that connection (the pool cleans it in its own background work, and discards it when the bound
    /// passes) and its query succeeds at once on another connection.
    @Test func theNextLesseeNeverInheritsAStuckCancel() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let registry = ResourceRegistry()
        let pool = try PostgresPool(conninfo: conninfo, maxConnections: 2, registry: registry, cancelFastPath: false)
        let frozen = ObservedValue<Int32?>(nil)
        try await withResourceScope("inherit", registry: ResourceRegistry()) { scope in
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            let task = Task {
                try await pool.withConnection { connection in
                    frozen.update { $0 = connection.backendPID }
                    return try await connection.execute("SELECT pg_sleep(20)")
                }
            }
            try await until("the lessee's backend is known", frozen.values()) { $0 != nil }
            let pid = try #require(frozen.value)
            try await TestDatabase.waitUntilActive(pid, observer: observer)
            #expect(kill(pid, SIGSTOP) == 0)
            defer { kill(pid, SIGCONT) }
            task.cancel()
            await #expect(throws: CancellationError.self) { try await task.value }
            let started = ContinuousClock.now
            let (one, used) = try await pool.withConnection { connection in
                (try await connection.query("SELECT 1").first?.decode(Int.self, at: 0), connection.backendPID)
            }
            #expect(one == 1)
            #expect(used != pid, "the next lessee was handed the connection whose cancel is stuck")
            #expect(
                ContinuousClock.now - started < TimingBound.singleShot,
                "the next lessee waited for someone else's cancel")
            kill(pid, SIGCONT)
        }
        await pool.shutdown()
        #expect(registry.liveCount == 0)
    }

    /// The task cancelled while the server cannot act returns promptly (`TimingBound.singleShot`); the connection's
    /// next operation gives up after `cancelTimeout` (500 ms in these tests) with a connection error, and the
    /// connection is discarded.
    static func expectCancelledThenDiscarded(_ task: Task<PostgresResult, any Error>, _ connection: PostgresConnection)
        async
    {
        let cancelled = ContinuousClock.now
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(ContinuousClock.now - cancelled < TimingBound.singleShot)
        let started = ContinuousClock.now
        await #expect { try await connection.execute("SELECT 1") } throws: {
            ($0 as? PostgresError)?.code == .connection
        }
        let waited = ContinuousClock.now - started
        // At least the cancel timeout; a connection that never gave up would wait for the frozen backend for ever.
        #expect(
            waited >= .milliseconds(400) && waited < .milliseconds(500) + TimingBound.singleShot,
            "gave up after \(waited)")
        #expect(connection.isBroken)
    }
}
