import DemoCommandLine
import DemoRuntime
import Foundation
import PostgresAdapter
import ResourceKit
import ResourceKitIO

extension Bench {
    /// `resource-bench --load TASKS [--on-reactor [--reactors N]]`: the sweep's load alone, once (`tasks` tasks over
    /// 16 pooled connections, 64,000 `SELECT $1::int` in all, 6,400 when `quick`, rounded down to a multiple of
    /// `tasks`), so that `perf stat` can count what one load costs:
    ///
    /// ```
    /// perf stat -e context-switches,task-clock .build/release/resource-bench --load 64 --on-reactor --postgres URL
    /// ```
    ///
    /// With `reactors` above 1 the load is sharded: that many reactors (the shared one and new ones), each with its
    /// own pool of 16 / `reactors` connections and `tasks` / `reactors` tasks that prefer it as their executor.
    ///
    /// Prints one line: q/s and this process's CPU per query over the load (the pools' connects and warm-up, which
    /// `perf stat` also counts, are outside it). Without `--postgres` (or `DATABASE_URL`) it starts a throwaway
    /// cluster first, which `perf stat` then counts too.
    static func load(tasks: Int, onReactor: Bool, reactors: Int, quick: Bool, postgres: String?) async throws {
        guard reactors == 1 || onReactor else { throw UsageError("--reactors goes with --on-reactor") }
        guard 16 % reactors == 0 else { throw UsageError("--reactors: give 1, 2 or 4 (they share 16 connections)") }
        guard tasks % reactors == 0 else { throw UsageError("--load: give a number of tasks that --reactors divides") }
        // Every task makes the same number of queries, so the total is what is measured, not a rounded target.
        let perTask = (quick ? 6_400 : 64_000) / tasks
        guard perTask > 0 else { throw UsageError("--load: at most \(quick ? 6_400 : 64_000) tasks") }
        let queries = perTask * tasks
        let extra = (1..<reactors).map { IOReactor(name: "rk.reactor.\($0)") }
        defer { for reactor in extra { reactor.shutdown() } }
        let executors = [IOReactor.shared] + extra
        try await PostgresTarget.with(postgres, quiet: true) { conninfo in
            let pools = try executors.map {
                try PostgresPool(
                    conninfo: conninfo, maxConnections: 16 / reactors, registry: ResourceRegistry(), reactor: $0)
            }
            do {
                for pool in pools { try await BulkBench.warm(pool, connections: 16 / reactors) }
                let (qps, cpu) = try await BulkBench.measure(queries: queries) {
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for (pool, reactor) in zip(pools, executors) {
                            group.addTask {
                                try await BulkBench.poolLoad(
                                    pool, tasks: tasks / reactors, queries: queries / reactors,
                                    executor: onReactor ? reactor : nil)
                            }
                        }
                        try await group.waitForAll()
                    }
                }
                let whose = !onReactor ? "" : reactors == 1 ? " on the reactor executor" : " on \(reactors) reactors"
                let noun = tasks == 1 ? "task" : "tasks"
                let figures = String(format: "%.0f q/s, %.1f us of CPU per query", qps, cpu)
                Console.line("\(tasks) \(noun)\(whose) over 16 pooled connections: \(queries) queries, \(figures)")
            } catch {
                for pool in pools { await pool.shutdown() }
                throw error
            }
            for pool in pools { await pool.shutdown() }
        }
    }
}
