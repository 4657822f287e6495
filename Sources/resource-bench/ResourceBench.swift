import DemoCommandLine
import DemoRuntime
import Glibc

/// `resource-bench`: ResourceKit's benchmark, apart from the CLI (`resource-demo bench` runs it).
///
/// Exit status: 0 success; 1 a failure; 2 a usage error; 130 on SIGINT and 143 on SIGTERM, after the embedded
/// Postgres stopped.
@main
struct ResourceBench {
    static func main() async {
        let all = Array(CommandLine.arguments.dropFirst())
        if all == ["_silent-peer"] { SilentPeerMode.serve() }  // the benchmark's own peer process
        let (_, arguments) = CommandLineEntry.resolve(
            all, commands: [BenchCommand.self], overview: BenchCommand.usage + "\n" + BenchCommand.details,
            version: "resource-bench (ResourceKit)")
        // Owner: `main`, which awaits it (signals cancel it).
        let work = Task<Int32, Never> {
            do {
                return try await BenchCommand.run(arguments)
            } catch let error as UsageError {
                return CommandLineEntry.usage(error)  // 2, as for a flag the parser refused
            } catch {
                if Task.isCancelled { return 0 }
                Console.error("resource-bench: \(error)")
                return 1
            }
        }
        let signals = SignalCanceller { work.cancel() }
        let status = await work.value
        exit(signals.exitStatus ?? status)
    }
}

/// The benchmark's flags (the same as `resource-demo bench`'s).
enum BenchCommand: DemoCommand {
    static let name = "bench"
    static let usage = """
        resource-bench [bench] [--quick] [--core] [--json] [--postgres URL] [--report FILE.svg]
               resource-bench --load TASKS [--on-reactor [--reactors N]] [--shared] [--no-reset] [--quick]
                              [--postgres URL]
               resource-bench --read-cancels N
               resource-bench --scopes N
               resource-bench --scale-cancels ROUNDS
               resource-bench --check THRESHOLDS.json [--postgres URL]
        """
    static let details = """
          Cancel-to-return latencies and throughput beside their references. Build with -c release.
          --core: only the core's figures (reads, scope overhead, scale); no Postgres.
          --report: also draw every latency figure's distribution beside its references (log scale) as SVG.
          --load: only the sweep's load, once: TASKS tasks over a pool of 16, 64,000 SELECT $1::int in all
            (6,400 with --quick), for `perf stat`; --on-reactor: the tasks prefer the reactor as their executor;
            --reactors N (1 to 16): a group of N reactors and a sharded pool of 16 over it, the tasks spread over them;
            --shared: the tasks run shared statements (pool.query) instead of leasing a connection each;
            --no-reset: the pool does not reset a session between users (the reset's price, beside the default).
          --read-cancels N: only N cancels of a parked socket read beside N of the Swift floor, for `perf stat`.
          --scopes N: only N scopes with a no-op resource beside N of their plain mechanics, for `perf stat`.
          --scale-cancels ROUNDS: only the 10,000 blocked reads cancelled at once, ROUNDS times, each round's time.
          --check THRESHOLDS.json: measure, then compare the ratios the file names with its bounds (exit 1 when one
            is past its bound: a regression); Benchmarks/README.md says which rows and why.
        """
    static let valueFlags: Set<String> = [
        "--postgres", "--report", "--load", "--reactors", "--read-cancels", "--scopes", "--scale-cancels", "--check",
    ]
    static let switchFlags: Set<String> = ["--quick", "--core", "--json", "--on-reactor", "--shared", "--no-reset"]
    static func run(_ arguments: Arguments) async throws -> Int32 {
        if let tasks = try arguments.integer("--load", in: 1...10_000) {
            try await Bench.load(
                tasks: tasks, onReactor: arguments.has("--on-reactor"),
                reactors: try arguments.integer("--reactors", in: 1...16) ?? 1, shared: arguments.has("--shared"),
                quick: arguments.has("--quick"),
                postgres: arguments.value("--postgres"), resets: !arguments.has("--no-reset"))
            return 0
        }
        if let rounds = try arguments.integer("--read-cancels", in: 1...1_000_000) {
            try await Bench.readCancels(rounds: rounds)
            return 0
        }
        if let count = try arguments.integer("--scopes", in: 1...100_000_000) {
            try await Bench.scopes(count: count)
            return 0
        }
        if let rounds = try arguments.integer("--scale-cancels", in: 1...1_000) {
            try await Bench.scaleCancels(rounds: rounds)
            return 0
        }
        if let thresholds = arguments.value("--check") {
            return try await BenchCheck.run(thresholds, postgres: arguments.value("--postgres"))
        }
        if arguments.has("--on-reactor") || arguments.value("--reactors") != nil || arguments.has("--shared")
            || arguments.has("--no-reset")
        {
            throw UsageError("--on-reactor, --reactors, --shared and --no-reset go with --load TASKS")
        }
        try await Bench.run(
            quick: arguments.has("--quick"), core: arguments.has("--core"), json: arguments.has("--json"),
            postgres: arguments.value("--postgres"), report: arguments.value("--report")
        )
        return 0
    }
}
