import Foundation
import PostgresAdapter
import PostgresTestSupport
import ResourceKit
import ResourceKitObservation
import ResourceKitPrometheus
import TestSupport
import Testing

/// `resourcekit_operations_total{kind,outcome}` counts what pooled callers were told: each query once, on a
/// borrowed connection or a shared one, a deadline (ours or the server's, carried as `statement_timeout`) as
/// `deadline_exceeded`, a cancelled caller as `cancelled` with its latency in the cancellation histogram.
@Suite struct OperationMetricsTests {
    static func operations(_ registry: ResourceRegistry) -> [OperationOutcome: UInt64] {
        registry.snapshot().counters[PostgresConnection.kind.name]?.operations ?? [:]
    }

    @Test func pooledQueriesAreCountedByOutcome() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let registry = ResourceRegistry()
        let pool = try PostgresPool(conninfo: conninfo, maxConnections: 2, registry: registry)
        // Completed: a leased query and a shared statement.
        _ = try await pool.withConnection { try await $0.query("SELECT 1") }
        _ = try await pool.query("SELECT 2")
        // Failed: a server error.
        await #expect(throws: PostgresError.self) { try await pool.withConnection { try await $0.query("SELEC") } }
        // Deadline exceeded: the scope's deadline, carried to the server and enforced by whichever side is first.
        await #expect(throws: DeadlineExceededError.self) {
            try await withResourceScope("metrics.deadline", deadline: .now + .milliseconds(200), registry: registry) {
                _ in
                try await pool.withConnection { try await $0.execute("SELECT pg_sleep(5)") }
            }
        }
        // Cancelled: the caller's task, as when a server's client disconnects.
        try await withResourceScope("metrics.observer", registry: ResourceRegistry()) { scope in
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            let marker = "rk-metrics-\(UUID().uuidString)"
            let running = Task {
                try await pool.withConnection { try await $0.execute("SELECT pg_sleep(5) /* \(marker) */") }
            }
            _ = try await TestDatabase.activeBackend(running: marker, observer: observer)
            running.cancel()
            await #expect(throws: CancellationError.self) { try await running.value }
        }

        let counts = Self.operations(registry)
        #expect(counts[.completed] == 2, "\(counts)")
        #expect(counts[.failed] == 1, "\(counts)")
        #expect(counts[.deadlineExceeded] == 1, "\(counts)")
        #expect(counts[.cancelled] == 1, "\(counts)")
        let latency = registry.snapshot().counters[PostgresConnection.kind.name]?.cancellationLatency
        // The cancelled caller's wait is timed (it was parked on the answer when the task was cancelled); the
        // deadline's only when the client's timer stopped it, not when the server's carried timeout did.
        #expect((latency?.count ?? 0) >= 1, "the cancel's wait is timed")

        let text = registry.prometheusExposition()
        for outcome in ["completed\"} 2", "failed\"} 1", "deadline_exceeded\"} 1", "cancelled\"} 1"] {
            #expect(text.contains(#"resourcekit_operations_total{kind="postgres.connection",outcome=""# + outcome))
        }
        #expect(text.contains(#"resourcekit_cancellation_latency_seconds_count{kind="postgres.connection"}"#))
        await pool.shutdown()
    }

    @Test func aStreamAndAPipelineAreOneOperationEach() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let registry = ResourceRegistry()
        try await withResourceScope("metrics.stream", registry: registry) { scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            var rows = 0
            for try await _ in try await connection.stream("SELECT generate_series(1, 500)") { rows += 1 }
            #expect(rows == 500)
            _ = try await connection.pipeline([PostgresStatement("SELECT 1"), PostgresStatement("SELECT 2")])
            // Broken off after one row: the caller left early, counted as a cancel.
            for try await _ in try await connection.stream("SELECT generate_series(1, 500)") { break }
            _ = try await connection.query("SELECT 3")
        }
        let counts = Self.operations(registry)
        #expect(counts[.completed] == 3, "\(counts)")
        #expect(counts[.cancelled] == 1, "\(counts)")
    }
}
