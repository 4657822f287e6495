import DemoRuntime
import DemoCommandLine
import Glibc
import ResourceKit

/// `resource-demo`: the tour, one command per resource kind, a server, and an entry to the benchmark.
///
/// Exit status: 0 success (also a run that `--cancel-after` cancelled as asked); 1 a failure; 2 a usage
/// error; 130 on SIGINT and 143 on SIGTERM (`serve` shuts down gracefully and exits 0), after every resource was
/// torn down and the embedded Postgres
/// stopped.
@main
struct ResourceDemo {
    static let version = "0.4.0"

    /// How the command's task ended.
    enum Ending: Sendable {
        case status(Int32)
        case usage(UsageError)
    }

    static func main() async {
        let (command, arguments) = CommandLineEntry.resolve(
            Array(CommandLine.arguments.dropFirst()), commands: CommandTable.all, overview: CommandTable.overview,
            version: "resource-demo \(version) (ResourceKit)")
        // Owner: `main`, which awaits it (signals cancel it). A usage error found while running is returned,
        // not exited on, so that the command's resources are torn down first.
        let work = Task<Ending, Never> {
            do {
                return .status(try await command.run(arguments))
            } catch let error as UsageError {
                return .usage(error)
            } catch {
                if Task.isCancelled { return .status(0) }
                Console.error("resource-demo: \(error)")
                return .status(1)
            }
        }
        let signals = SignalCanceller { work.cancel() }
        let status: Int32
        switch await work.value {
        case .status(let code): status = code
        case .usage(let error): status = CommandLineEntry.usage(error)
        }
        exit(signals.exitStatus ?? status)
    }
}
