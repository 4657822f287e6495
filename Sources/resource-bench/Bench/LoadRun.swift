import DemoCommandLine
import DemoRuntime
import Foundation
import PostgresAdapter
import ResourceKit
import ResourceKitIO

extension Bench {
    /// `resource-bench --load TASKS [--on-reactor [--reactors N]] [--shared]`: the sweep's load alone, once (`tasks`
    /// tasks over 16 pooled connections, 64,000 `SELECT $1::int` in all, 6,400 when `quick`, rounded down to a
    /// multiple of `tasks`), so that `perf stat` can count what one load costs:
    ///
    /// ```
    /// perf stat -e context-switches,task-clock .build/release/resource-bench --load 64 --on-reactor --postgres URL
    /// ```
    ///
    /// With `reactors` above 1 the load is sharded: a new `IOReactorGroup` of that many reactors and a
    /// ``PostgresShardedPool`` of 16 over it, task `i` preferring reactor `i % reactors` (the bench's sharded rows,
    /// over a group of any size). With `shared` the tasks run shared statements (`pool.query`) instead of
    /// leasing a connection each (`withConnection`): on the plain pool, or on the sharded one with `--reactors`.
    /// With `resets` false (`--no-reset`, the plain pool only) the pool does not reset a session between users: the
    /// same load with and without the carried `DISCARD ALL` prices the reset.
    ///
    /// Prints one line: q/s and this process's CPU per query over the load (the pools' connects and warm-up, which
    /// `perf stat` also counts, are outside it). Without `--postgres` (or `DATABASE_URL`) it starts a throwaway
    /// cluster first, which `perf stat` then counts too.
    static func load(
        tasks: Int, onReactor: Bool, reactors: Int, shared: Bool, quick: Bool, postgres: String?,
        resets: Bool = true
    ) async throws {
        guard reactors == 1 || onReactor else { throw UsageError("--reactors goes with --on-reactor") }
        guard resets || reactors == 1 else { throw UsageError("--no-reset goes with the plain pool, not --reactors") }
        guard !(shared && onReactor && reactors == 1) else {
            throw UsageError("--shared goes with a plain pool or a sharded one (--on-reactor --reactors N)")
        }
        let sharedNote = (shared ? ", shared statements" : "") + (resets ? "" : ", no session reset")
        // Every task makes the same number of queries, so the total is what is measured, not a rounded target.
        let perTask = (quick ? 6_400 : 64_000) / tasks
        guard perTask > 0 else { throw UsageError("--load: at most \(quick ? 6_400 : 64_000) tasks") }
        let queries = perTask * tasks
        let noun = tasks == 1 ? "task" : "tasks"
        func report(_ qps: Double, _ cpu: Double, _ whose: String) {
            let figures = String(format: "%.0f q/s, %.1f us of CPU per query", qps, cpu)
            Console.line("\(tasks) \(noun)\(whose) over 16 pooled connections: \(queries) queries, \(figures)")
        }
        try await PostgresTarget.with(postgres, quiet: true) { conninfo in
            if reactors > 1 {
                let group = IOReactorGroup(count: reactors, name: "rk.bench")
                defer { group.shutdown() }
                let pool = try PostgresShardedPool(
                    conninfo: conninfo, maxConnections: 16, reactors: group,
                    configuration: .init(registry: ResourceRegistry()))
                do {
                    for shard in pool.shards { try await BulkBench.warm(shard, connections: shard.maxConnections) }
                    let (qps, cpu) = try await BulkBench.measure(queries: queries) {
                        if shared {
                            try await BulkBench.sharedLoad(pool, tasks: tasks, queries: queries)
                        } else {
                            try await BulkBench.shardedLoad(pool, tasks: tasks, queries: queries)
                        }
                    }
                    report(qps, cpu, " on \(reactors) reactors (a sharded pool)\(sharedNote)")
                } catch {
                    await pool.shutdown()
                    throw error
                }
                await pool.shutdown()
                return
            }
            let pool = try PostgresPool(
                conninfo: conninfo, maxConnections: 16, registry: ResourceRegistry(),
                session: PostgresSessionOptions(resetsBetweenUsers: resets))
            do {
                try await BulkBench.warm(pool, connections: 16)
                let (qps, cpu) = try await BulkBench.measure(queries: queries) {
                    if shared {
                        try await BulkBench.sharedLoad(pool, tasks: tasks, queries: queries)
                    } else {
                        try await BulkBench.poolLoad(
                            pool, tasks: tasks, queries: queries, executor: onReactor ? IOReactor.shared : nil)
                    }
                }
                report(qps, cpu, (onReactor ? " on the reactor executor" : "") + sharedNote)
            } catch {
                await pool.shutdown()
                throw error
            }
            await pool.shutdown()
        }
    }
}
