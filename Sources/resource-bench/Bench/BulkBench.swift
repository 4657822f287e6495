import Foundation
import Glibc
import PostgresAdapter
import ResourceKit
import ResourceKitIO
import ResourceKitProcesses

/// Issue #15's figures: throughput and CPU per query under concurrency against 16 blocking libpq threads,
/// COPY both ways against `psql \copy`, and a pipeline against sequential queries.
enum BulkBench {
    /// Where a load's tasks run and which pool they lease from.
    enum Placement: Equatable {
        /// Plain child tasks on the cooperative pool, one pool of 16 on the shared reactor.
        case cooperative
        /// Tasks that prefer the shared reactor as their executor, the same pool.
        case reactor
        /// A ``PostgresShardedPool`` of 16 over `IOReactorGroup.shared`; task `i` prefers reactor `i % count`.
        case sharded
        /// Plain child tasks on the cooperative pool, shared statements (`pool.query`) of the pool of 16.
        case shared
        /// As `sharded`, with shared statements of the sharded pool (`pool.query`).
        case shardedShared
        /// As `cooperative`, over a pool of 16 that does not reset a session between users, against the threads;
        /// the carried `DISCARD ALL`'s price against `cooperative` is measured in pairs (``BulkBench/resetPrice``).
        case withoutReset
    }

    /// One task count's figures beside the reference measured in the same batches.
    struct Concurrency {
        let tasks: Int
        let placement: Placement
        var oursQPS: Samples
        var oursCPU: Samples
        var rawQPS = Samples("16 threads, blocking libpq loop each", unit: "qps")
        var rawCPU = Samples("CPU per query, 16 blocking libpq threads", unit: "us")
        /// Each round's figure over the threads' where the two were measured in rounds back to back
        /// (``BulkBench/againstThreads(_:rounds:queries:load:threads:)``); `nil` for the sweep's own batches.
        var qpsRatios: [Double]?
        var cpuRatios: [Double]?

        init(tasks: Int, placement: Placement = .cooperative) {
            self.tasks = tasks
            self.placement = placement
            let whose: String
            let pool: String
            switch placement {
            case .cooperative: (whose, pool) = ("", "a pool of 16")
            case .withoutReset: (whose, pool) = ("", "a pool of 16 with no session reset")
            case .reactor: (whose, pool) = (" on the reactor executor", "a pool of 16")
            case .sharded:
                (whose, pool) = (" on \(IOReactorGroup.shared.count) reactors", "a sharded pool of 16")
            case .shared: (whose, pool) = (", shared statements,", "a pool of 16")
            case .shardedShared:
                (whose, pool) = (
                    " on \(IOReactorGroup.shared.count) reactors, shared statements,", "a sharded pool of 16"
                )
            }
            oursQPS = Samples("\(tasks) tasks\(whose) over \(pool): SELECT $1::int", unit: "qps")
            oursCPU = Samples("CPU per query, \(tasks) tasks\(whose) over \(pool)", unit: "us")
        }
    }

    /// `batches` rounds, interleaved: for each task count of `sweep` (each task count's tasks share 16 pooled
    /// connections), ours, then for each count of `onReactor` the same with tasks that prefer the reactor as their
    /// executor, then for each count of `sharded` the same over a sharded pool of 16 (tasks spread over the shared
    /// reactor group, each leasing from its reactor's shard), then the shared statements (``PostgresPool/query(_:_:)``)
    /// for each count of `shared` over the pool and of `sharded` over the sharded pool, then the reference once (16
    /// threads, one blocking connection each); each run makes `queries` queries in all. Every row is compared with
    /// the reference runs of its own batches. The counts of `withoutReset` run as the sweep's, over a second pool of
    /// 16 that resets no session between users; the reset's price is measured after the batches, in `resetPairs`
    /// pairs of loads of the first of them (``resetPrice(tasks:queries:pairs:pool:resetless:)``). Last, the rows of
    /// `paired` (placement and task count) are measured in `pairedRounds` rounds with the threads, loads of
    /// `pairedQueries` queries (``againstThreads(_:rounds:queries:load:threads:)``), and only there: the batches skip
    /// them.
    static func concurrency(
        queries: Int, batches: Int, sweep: [Int] = [16, 64, 256], onReactor: [Int] = [64, 256],
        sharded: [Int] = [64, 256], shared: [Int] = [16, 64, 256], withoutReset: [Int] = [64], resetPairs: Int,
        paired: [(placement: Placement, tasks: Int)] = [(.cooperative, 64), (.shared, 64), (.shardedShared, 64)],
        pairedRounds: Int, pairedQueries: Int, conninfo: String
    ) async throws -> (sweep: [Concurrency], resetPrice: ResetPrice?) {
        var figures =
            sweep.map { Concurrency(tasks: $0) } + withoutReset.map { Concurrency(tasks: $0, placement: .withoutReset) }
            + onReactor.map { Concurrency(tasks: $0, placement: .reactor) }
            + sharded.map { Concurrency(tasks: $0, placement: .sharded) }
            + shared.map { Concurrency(tasks: $0, placement: .shared) }
            + sharded.map { Concurrency(tasks: $0, placement: .shardedShared) }
        let pool = try PostgresPool(conninfo: conninfo, maxConnections: 16, registry: ResourceRegistry())
        let resetless = try PostgresPool(
            conninfo: conninfo, maxConnections: 16, registry: ResourceRegistry(),
            session: PostgresSessionOptions(resetsBetweenUsers: false))
        let shardedPool = try PostgresShardedPool(
            conninfo: conninfo, maxConnections: 16, configuration: .init(registry: ResourceRegistry()))
        let raws = try (0..<16).map { _ in try RawLibPQConnection(conninfo) }
        try await warm(pool, connections: 16)
        try await warm(resetless, connections: 16)
        for shard in shardedPool.shards { try await warm(shard, connections: shard.maxConnections) }
        func run(_ figure: Concurrency, queries: Int) async throws {
            switch figure.placement {
            case .cooperative: try await poolLoad(pool, tasks: figure.tasks, queries: queries)
            case .withoutReset: try await poolLoad(resetless, tasks: figure.tasks, queries: queries)
            case .reactor: try await poolLoad(pool, tasks: figure.tasks, queries: queries, executor: IOReactor.shared)
            case .sharded: try await shardedLoad(shardedPool, tasks: figure.tasks, queries: queries)
            case .shared: try await sharedLoad(pool, tasks: figure.tasks, queries: queries)
            case .shardedShared: try await sharedLoad(shardedPool, tasks: figure.tasks, queries: queries)
            }
        }
        // The rows of `paired` are measured in their own rounds below, not in the batches.
        let pairedIndices = paired.compactMap { row in
            figures.firstIndex { $0.placement == row.placement && $0.tasks == row.tasks }
        }
        for _ in 0..<batches {
            for index in figures.indices where !pairedIndices.contains(index) {
                let (qps, cpu) = try await measure(queries: queries) { try await run(figures[index], queries: queries) }
                figures[index].oursQPS.values.append(qps)
                figures[index].oursCPU.values.append(cpu)
            }
            let (qps, cpu) = try await measure(queries: queries) { await threadsLoad(raws, queries: queries) }
            for index in figures.indices {
                figures[index].rawQPS.values.append(qps)
                figures[index].rawCPU.values.append(cpu)
            }
        }
        // The reset's price in pairs of its own: the sweep's two rows are one load each per batch, too few to pair.
        var price: ResetPrice?
        if let tasks = withoutReset.first {
            price = try await resetPrice(
                tasks: tasks, queries: queries, pairs: resetPairs, pool: pool, resetless: resetless)
        }
        let against = try await againstThreads(
            pairedIndices.map { figures[$0] }, rounds: pairedRounds, queries: pairedQueries,
            load: { try await run($0, queries: pairedQueries) },
            threads: { await threadsLoad(raws, queries: pairedQueries) })
        for (index, figure) in zip(pairedIndices, against) { figures[index] = figure }
        await pool.shutdown()
        await resetless.shutdown()
        await shardedPool.shutdown()
        return (figures, price)
    }

    /// Opens `connections` of the pool's connections (each holds one for 50 ms, all at once).
    static func warm(_ pool: PostgresPool, connections: Int) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<connections {
                group.addTask { _ = try await pool.withConnection { try await $0.query("SELECT pg_sleep(0.05)") } }
            }
            try await group.waitForAll()
        }
    }

    /// `tasks` tasks, `queries` queries in all: task `task` makes `queries / tasks` calls of `query(task, index)`,
    /// preferring `executor(task)` when that is not `nil` (else it is a plain child task).
    static func load(
        tasks: Int, queries: Int, executor: (Int) -> (any TaskExecutor)?,
        _ query: @escaping @Sendable (_ task: Int, _ index: Int) async throws -> Void
    ) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<tasks {
                let work: @Sendable () async throws -> Void = {
                    for index in 0..<(queries / tasks) { try await query(task, index) }
                }
                if let preferred = executor(task) {
                    group.addTask(executorPreference: preferred, operation: work)
                } else {
                    group.addTask(operation: work)
                }
            }
            try await group.waitForAll()
        }
    }

    /// `tasks` tasks sharing the pool, `queries` queries in all; the tasks prefer `executor` when one is given
    /// (without one they are added as plain child tasks, exactly as before the executor rows existed).
    static func poolLoad(
        _ pool: PostgresPool, tasks: Int, queries: Int, executor: (any TaskExecutor)? = nil
    ) async throws {
        try await load(tasks: tasks, queries: queries, executor: { _ in executor }) { task, index in
            _ = try await pool.withConnection { try await $0.query("SELECT $1::int", [task * 1_000_000 + index]) }
        }
    }

    /// `tasks` tasks over a sharded pool, `queries` queries in all: task `i` prefers reactor `i % count` of the
    /// pool's group and leases from that reactor's shard (the shape ``PostgresShardedPool`` documents).
    static func shardedLoad(_ pool: PostgresShardedPool, tasks: Int, queries: Int) async throws {
        try await load(tasks: tasks, queries: queries, executor: { pool.reactors.reactors[$0 % pool.reactors.count] }) {
            task, index in
            _ = try await pool.withConnection { try await $0.query("SELECT $1::int", [task * 1_000_000 + index]) }
        }
    }

    /// `tasks` tasks over the pool's shared statements (``PostgresPool/query(_:_:)``), `queries` in all, as plain
    /// child tasks.
    static func sharedLoad(_ pool: PostgresPool, tasks: Int, queries: Int) async throws {
        try await load(tasks: tasks, queries: queries, executor: { _ in nil }) { task, index in
            _ = try await pool.query("SELECT $1::int", [task * 1_000_000 + index])
        }
    }

    /// `tasks` tasks over a sharded pool's shared statements (``PostgresShardedPool/query(_:_:)``), `queries` in
    /// all: task `i` prefers reactor `i % count` of the pool's group, as in ``shardedLoad(_:tasks:queries:)``.
    static func sharedLoad(_ pool: PostgresShardedPool, tasks: Int, queries: Int) async throws {
        try await load(tasks: tasks, queries: queries, executor: { pool.reactors.reactors[$0 % pool.reactors.count] }) {
            task, index in
            _ = try await pool.query("SELECT $1::int", [task * 1_000_000 + index])
        }
    }

    /// The reference: 16 threads, each a blocking libpq loop on its own connection, `queries` queries in all.
    static func threadsLoad(_ raws: [RawLibPQConnection], queries: Int) async {
        await withTaskGroup(of: Void.self) { group in
            for raw in raws {
                group.addTask {
                    await RawLibPQConnection.onThread {
                        for index in 0..<(queries / raws.count) { raw.exec("SELECT $1::int", String(index)) }
                    }
                }
            }
        }
    }

    /// Queries per second and this process's CPU microseconds per query of `body`, which makes `queries` queries.
    static func measure(queries: Int, _ body: () async throws -> Void) async throws -> (qps: Double, cpu: Double) {
        let cpu = processCPUSeconds()
        let start = ContinuousClock.now
        try await body()
        let elapsed = Samples.convert(.now - start, to: "ms") / 1000
        return (Double(queries) / elapsed, (processCPUSeconds() - cpu) * 1e6 / Double(queries))
    }

    struct Copy {
        var outOurs = Samples("COPY TO STDOUT, 1M rows: copyOut()", unit: "rows/s")
        var outPsql = Samples("psql \\copy ... TO /dev/null", unit: "rows/s")
        var inOurs = Samples("COPY FROM STDIN, 1M rows: copyIn()", unit: "rows/s")
        var inPsql = Samples("psql \\copy ... FROM a file", unit: "rows/s")
    }

    /// COPY out and in of `rows` rows, ours and `psql \copy`'s, interleaved over `rounds`.
    static func copy(rows: Int, rounds: Int, conninfo: String) async throws -> Copy {
        var figures = Copy()
        let directory = NSTemporaryDirectory() + "rk-bench-copy-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var text = ""
        text.reserveCapacity(rows * 20)
        for value in 1...rows { text += "\(value)\trow \(value)\n" }
        let data = Array(text.utf8)
        text = ""
        let file = directory + "/rows.tsv"
        try Data(data).write(to: URL(fileURLWithPath: file))
        let chunks = stride(from: 0, to: data.count, by: 65_536).map {
            Array(data[$0..<Swift.min($0 + 65_536, data.count)])
        }
        let select = "SELECT n, 'row ' || n FROM generate_series(1, \(rows)) AS n"
        try await withResourceScope("bench.copy", registry: ResourceRegistry()) { scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            try await connection.execute("DROP TABLE IF EXISTS resource_bench_copy")
            try await connection.execute("CREATE UNLOGGED TABLE resource_bench_copy (n int8, label text)")
            for _ in 0..<rounds {
                var start = ContinuousClock.now
                var count = 0
                for try await chunk in try await connection.copyOut("COPY (\(select)) TO STDOUT") {
                    for byte in chunk where byte == UInt8(ascii: "\n") { count += 1 }  // a chunk holds whole rows
                }
                figures.outOurs.values.append(Double(count) / seconds(since: start))

                start = .now
                try await psql(conninfo, "\\copy (\(select)) TO '/dev/null'")
                figures.outPsql.values.append(Double(rows) / seconds(since: start))

                try await connection.execute("TRUNCATE resource_bench_copy")
                start = .now
                let loaded = try await connection.copyIn(
                    "COPY resource_bench_copy FROM STDIN", from: Chunks(chunks: chunks))
                figures.inOurs.values.append(Double(loaded) / seconds(since: start))

                try await connection.execute("TRUNCATE resource_bench_copy")
                start = .now
                try await psql(conninfo, "\\copy resource_bench_copy FROM '\(file)'")
                figures.inPsql.values.append(Double(rows) / seconds(since: start))
                try await connection.execute("TRUNCATE resource_bench_copy")
            }
            try await connection.execute("DROP TABLE resource_bench_copy")
        }
        return figures
    }

    struct Chunks: AsyncSequence, Sendable {
        typealias Element = [UInt8]
        let chunks: [[UInt8]]
        struct AsyncIterator: AsyncIteratorProtocol {
            var index = 0
            let chunks: [[UInt8]]
            mutating func next() async -> [UInt8]? {
                guard index < chunks.count else { return nil }
                defer { index += 1 }
                return chunks[index]
            }
        }
        func makeAsyncIterator() -> AsyncIterator { AsyncIterator(chunks: chunks) }
    }

    /// Runs `psql <conninfo> -c <command>` (blocking: on the blocking pool); throws if it fails.
    static func psql(_ conninfo: String, _ command: String) async throws {
        let status = try await BlockingPool.shared.run { () -> Int32 in
            let arguments = ["psql", conninfo, "-q", "-v", "ON_ERROR_STOP=1", "-c", command]
            guard let pid = try? Syscall.spawn(arguments, standardOutput: .nullDevice) else { return -1 }
            return (try? Syscall.waitForExit(pid)) ?? -1
        }
        guard status == 0 else {
            throw PostgresError(.connection, "psql failed (status \(status)); is the PostgreSQL client installed?")
        }
    }

    static func seconds(since start: ContinuousClock.Instant) -> Double {
        Samples.convert(.now - start, to: "ms") / 1000
    }

    /// A pipeline of `statements` `SELECT $1::int` against as many sequential queries, same connection, in `rounds`
    /// rounds of one of each, back to back, each round starting with the other one than the last round did
    /// (``rotatingRounds(_:sides:_:)``); the ratios are each round's (``BenchRow/pairedRatios``).
    static func pipeline(statements: Int, rounds: Int, conninfo: String) async throws -> (
        pipeline: Samples, sequential: Samples, ratios: [Double]
    ) {
        var pipelined = Samples("pipeline of 1000 SELECT $1::int", unit: "qps")
        var sequential = Samples("1000 sequential SELECT $1::int, same connection", unit: "qps")
        var ratios: [Double] = []
        try await withResourceScope("bench.pipeline", registry: ResourceRegistry()) { scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            let batch = (0..<statements).map { PostgresStatement("SELECT $1::int", [$0]) }
            let measured = try await rotatingRounds(rounds, sides: 2) { side in
                let start = ContinuousClock.now
                if side == 0 {
                    let results = try await connection.pipeline(batch)
                    guard results.allSatisfy({ (try? $0.get()) != nil }) else {
                        throw PostgresError(.invalidQuery, "a pipelined statement failed")
                    }
                } else {
                    for index in 0..<statements { _ = try await connection.query("SELECT $1::int", [index]) }
                }
                return Double(statements) / seconds(since: start)
            }
            for round in measured {
                let (pipelinedRate, sequentialRate) = (round[0], round[1])
                pipelined.values.append(pipelinedRate)
                sequential.values.append(sequentialRate)
                if sequentialRate > 0 { ratios.append(pipelinedRate / sequentialRate) }
            }
        }
        return (pipelined, sequential, ratios)
    }
}
