import Glibc
import ResourceKit

/// `resource-demo`: the tour, one command per resource kind, a server, and the benchmark.
///
/// Exit status: 0 success (also a run that `--cancel-after` cancelled as asked); 1 a failure; 2 a usage
/// error; 130 on SIGINT and 143 on SIGTERM, after every resource was torn down and the embedded Postgres
/// stopped.
@main
struct ResourceDemo {
    static let version = "0.3.0"

    static func main() async {
        let all = Array(CommandLine.arguments.dropFirst())
        if all == ["_silent-peer"] { SilentPeerMode.serve() }  // the benchmark's peer process
        if all == ["--version"] {
            Console.line("resource-demo \(version) (ResourceKit)")
            exit(0)
        }
        if all.first == "--help" || all.first == "-h" || all.first == "help" {
            Console.line(HelpText.overview)
            exit(0)
        }
        let command = all.first.flatMap { $0.hasPrefix("--") ? nil : $0 } ?? "tour"
        let rest = all.first == command ? Array(all.dropFirst()) : all
        guard let spec = HelpText.commands[command] else { usage("unknown command '\(command)'") }
        if rest.contains("--help") || rest.contains("-h") {
            Console.line(spec.help)
            exit(0)
        }
        let arguments: Arguments
        do {
            arguments = try Arguments(
                command: command, rest, valueFlags: spec.valueFlags, switchFlags: spec.switchFlags)
        } catch {
            usage(String(describing: error))
        }

        // Owner: `main`, which awaits it (signals cancel it).
        let work = Task<Int32, Never> {
            do {
                return try await dispatch(command, arguments)
            } catch let error as UsageError {
                usage(error.description)
            } catch {
                if Task.isCancelled { return 0 }
                Console.error("resource-demo: \(error)")
                return 1
            }
        }
        let signals = SignalCanceller { work.cancel() }
        let status = await work.value
        exit(signals.exitStatus ?? status)
    }

    static func dispatch(_ command: String, _ arguments: Arguments) async throws -> Int32 {
        switch command {
        case "tour": return try await Tour.run(arguments)
        case "pg": return try await PgCommand.run(arguments)
        case "socket": return try await StreamCommands.socket(arguments)
        case "file": return try await StreamCommands.file(arguments)
        case "latest": return try await LatestCommand.run(arguments)
        case "serve": return try await ServeCommand.run(arguments)
        case "listen": return try await BulkCommands.listen(arguments)
        case "copy": return try await BulkCommands.copy(arguments)
        case "bench":
            try await Bench.run(
                quick: arguments.has("--quick"), core: arguments.has("--core"), json: arguments.has("--json"),
                postgres: arguments.value("--postgres"), report: arguments.value("--report")
            )
            return 0
        default: throw UsageError("unknown command '\(command)'")
        }
    }
}

/// Prints a usage error (naming the bad flag or value) and exits with status 2.
func usage(_ message: String) -> Never {
    Console.error("resource-demo: \(message) (try --help)")
    exit(2)
}
