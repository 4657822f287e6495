import DemoRuntime
import DemoCommandLine
import PostgresAdapter
import ResourceKit
import ResourceKitPatterns

/// `resource-demo latest [--ids a,ab,abc,...] [--debounce DURATION] [--postgres URL] [--json]`: feeds ids
/// 50 ms apart to a ``LatestTask`` whose work is a 200 ms query; shows which ids reached the server (a
/// sequence the query advances) and that superseded queries were cancelled there.
enum LatestCommand: Sendable {
    static let valueFlags: Set<String> = ["--ids", "--debounce", "--postgres"]
    static let gap: Duration = .milliseconds(50)

    struct Summary: Sendable {
        var committed: String?
        var stats: LatestTask<String, String>.Stats
        var serverExecutions: Int
        var elapsed: Duration
        /// The longest time between two consecutive updates as fed (50 ms apart, unless the machine is loaded):
        /// a debounce longer than it lets no superseded id start.
        var longestGap: Duration
    }

    static func run(_ arguments: Arguments) async throws -> Int32 {
        let ids = (arguments.value("--ids") ?? "a,ab,abc,abcd,abcde").split(separator: ",").map(String.init)
        guard !ids.isEmpty, ids.allSatisfy({ !$0.isEmpty && $0.utf8.count <= 256 }) else {
            throw UsageError("--ids: give a comma-separated list of non-empty ids (at most 256 bytes each)")
        }
        let debounce = try arguments.duration("--debounce")
        let json = arguments.has("--json")
        return try await PostgresTarget.with(arguments.value("--postgres"), quiet: json) { conninfo in
            let summary = try await demonstrate(ids: ids, debounce: debounce, conninfo: conninfo) { id, result in
                if json {
                    Console.line(
                        JSONLine(["event": .string("update"), "id": .string(id), "result": .string(result)]).text)
                } else {
                    Console.line("update \(id.padding(toLength: 12, withPad: " ", startingAt: 0)) \(result)")
                }
            }
            if json {
                var line = JSONLine(["outcome": .string("completed"), "command": .string("latest")])
                line.set("committed", summary.committed.map { .string($0) } ?? .null)
                line.set("started", .int(Int64(summary.stats.started)))
                line.set("cancelled", .int(Int64(summary.stats.cancelled)))
                line.set("debounced_away", .int(Int64(summary.stats.debouncedAway)))
                line.set("dropped_stale", .int(Int64(summary.stats.droppedStale)))
                line.set("server_executions", .int(Int64(summary.serverExecutions)))
                line.set("elapsed_us", .int(summary.elapsed.microseconds))
                line.set("longest_gap_us", .int(summary.longestGap.microseconds))
                Console.line(line.text)
            } else {
                Console.line(
                    """
                    committed: \(summary.committed ?? "nothing"); runs started \(summary.stats.started), cancelled \
                    \(summary.stats.cancelled), debounced away \(summary.stats.debouncedAway); queries that \
                    reached the server: \(summary.serverExecutions)
                    """
                )
            }
            return 0
        }
    }

    /// Runs the demonstration and returns what happened; `report(id, result)` is told about every update.
    static func demonstrate(
        ids: [String],
        debounce: Duration?,
        conninfo: String,
        report: (String, String) -> Void
    ) async throws -> Summary {
        let started = ContinuousClock.now
        let sequence = "resource_demo_latest_\(UInt32.random(in: 0...UInt32.max))"
        return try await withResourceScope("demo.latest") { scope in
            let admin = try await PostgresConnection.connect(conninfo, in: scope)
            _ = try await admin.execute("CREATE SEQUENCE \(sequence)")
            do {
                let latest = try await LatestTask<String, String>.start(in: scope, "latest", debounce: debounce) {
                    id, runScope in
                    let connection = try await PostgresConnection.connect(conninfo, in: runScope)
                    let rows = try await connection.query(
                        "SELECT $1::text, nextval('\(sequence)'), pg_sleep(0.2)", [id])
                    return try rows[0].decode(String.self, at: 0)
                }
                var longestGap = Duration.zero
                var previous: ContinuousClock.Instant?
                for (index, id) in ids.enumerated() {
                    let now = ContinuousClock.now
                    if let previous { longestGap = max(longestGap, now - previous) }
                    let result = latest.update(id: id)
                    previous = ContinuousClock.now
                    report(id, describe(result))
                    if index < ids.count - 1 { try await Task.sleep(for: gap) }
                }
                try await latest.idle()
                let committed = latest.output.value
                await latest.close()
                let executions = try await admin.query(
                    "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM \(sequence)")
                let count = try executions[0].decode(Int.self, at: 0)
                _ = try await admin.execute("DROP SEQUENCE \(sequence)")
                return Summary(
                    committed: committed, stats: latest.stats, serverExecutions: count,
                    elapsed: ContinuousClock.now - started, longestGap: longestGap)
            } catch {
                // Best-effort cleanup on the failure path. After a signal the scope is cancelled and the
                // sequence stays behind (on an embedded cluster it goes with the cluster).
                _ = try? await admin.execute("DROP SEQUENCE IF EXISTS \(sequence)")
                throw error
            }
        }
    }

    static func describe(_ result: LatestTask<String, String>.UpdateResult) -> String {
        switch result {
        case .started(let generation): return "started (generation \(generation); any older run is cancelled)"
        case .unchanged: return "unchanged (same id: nothing restarts)"
        case .refusedClosed: return "refused (closed)"
        case .refusedFeedbackLoop: return "refused (feedback loop)"
        }
    }
}
