import DemoRuntime
import Foundation
import PostgresAdapter
import ResourceKit
import ResourceKitIO

extension Bench {
    /// `resource-bench --load TASKS [--on-reactor]`: the sweep's load alone, once (`tasks` tasks over a pool of 16,
    /// 64,000 `SELECT $1::int` in all, 6,400 when `quick`), so that `perf stat` can count what one load costs:
    ///
    /// ```
    /// perf stat -e context-switches,task-clock .build/release/resource-bench --load 64 --on-reactor --postgres URL
    /// ```
    ///
    /// Prints one line: q/s and this process's CPU per query over the load (the pool's connects and warm-up, which
    /// `perf stat` also counts, are outside it). Without `--postgres` (or `DATABASE_URL`) it starts a throwaway
    /// cluster first, which `perf stat` then counts too.
    static func load(tasks: Int, onReactor: Bool, quick: Bool, postgres: String?) async throws {
        let queries = quick ? 6_400 : 64_000
        try await PostgresTarget.with(postgres, quiet: true) { conninfo in
            let pool = try PostgresPool(conninfo: conninfo, maxConnections: 16, registry: ResourceRegistry())
            do {
                try await BulkBench.warm(pool, connections: 16)
                let (qps, cpu) = try await BulkBench.measure(queries: queries) {
                    try await BulkBench.poolLoad(
                        pool, tasks: tasks, queries: queries, executor: onReactor ? IOReactor.shared : nil)
                }
                let whose = onReactor ? " on the reactor executor" : ""
                let figures = String(format: "%.0f q/s, %.1f us of CPU per query", qps, cpu)
                let noun = tasks == 1 ? "task" : "tasks"
                Console.line("\(tasks) \(noun)\(whose) over a pool of 16: \(queries) queries, \(figures)")
            } catch {
                await pool.shutdown()
                throw error
            }
            await pool.shutdown()
        }
    }
}
