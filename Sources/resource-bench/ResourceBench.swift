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
    static let usage = "resource-bench [bench] [--quick] [--core] [--json] [--postgres URL] [--report FILE.svg]"
    static let details = """
          Cancel-to-return latencies and throughput beside their references. Build with -c release.
          --core: only the core's figures (reads, scope overhead, scale); no Postgres.
          --report: also draw every latency figure's distribution beside its references (log scale) as SVG.
        """
    static let valueFlags: Set<String> = ["--postgres", "--report"]
    static let switchFlags: Set<String> = ["--quick", "--core", "--json"]
    static func run(_ arguments: Arguments) async throws -> Int32 {
        try await Bench.run(
            quick: arguments.has("--quick"), core: arguments.has("--core"), json: arguments.has("--json"),
            postgres: arguments.value("--postgres"), report: arguments.value("--report")
        )
        return 0
    }
}
