package import DemoCommandLine
import Glibc

/// The start of both executables' `main`: parse the command line against a command table, answer `--help` and
/// `--version`, refuse a bad command line, and hand back what to run.
package enum CommandLineEntry {
    /// Returns the command `arguments` select and its parsed flags. Prints help or the version and exits with 0,
    /// or prints the usage error and exits with 2.
    package static func resolve(
        _ arguments: [String], commands: [any DemoCommand.Type], overview: String, version: String
    ) -> (command: any DemoCommand.Type, arguments: Arguments) {
        switch CommandLineRequest.parse(arguments, commands: commands, overview: overview, version: version) {
        case .show(let text):
            Console.line(text)
            exit(0)
        case .usageError(let error):
            exit(usage(error))
        case .run(let name, let parsed):
            // `parse` found the name in the same table.
            let command = commands.first { $0.name == name }!
            return (command, parsed)
        }
    }

    /// Prints a usage error (naming the bad flag or value); returns the exit status for it, 2.
    package static func usage(_ error: UsageError) -> Int32 {
        Console.error("\(Console.program): \(error.description) (try --help)")
        return 2
    }
}
