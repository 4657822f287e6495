/// One `resource-demo` command: its name, its flags, its help and what it runs. The executable lists its
/// commands once (a table of these); the overview, the per-command help, the flag parsing and the dispatch
/// all come from that table.
package protocol DemoCommand: Sendable {
    /// The word that selects it (`pg`, `serve`, ...).
    static var name: String { get }
    /// The synopsis line: `resource-demo pg --sql SQL [--cancel-after DURATION] ...`.
    static var usage: String { get }
    /// What it does, in indented lines below the synopsis (`--help`).
    static var details: String { get }
    /// Flags that take a value (`--flag value` or `--flag=value`).
    static var valueFlags: Set<String> { get }
    /// Flags without a value.
    static var switchFlags: Set<String> { get }
    /// Runs the command; returns the exit status. Throws ``UsageError`` for a bad value (exit status 2).
    ///
    /// Cancellation: a signal cancels the task that runs it; the command tears its resources down and returns.
    static func run(_ arguments: Arguments) async throws -> Int32
}

/// What a command line asks for.
package enum CommandLineRequest: Equatable {
    /// Show this text (the caller prints it) and exit with status 0 (`--help`, `COMMAND --help`, `--version`).
    case show(String)
    /// Print this usage error and exit with status 2.
    case usageError(UsageError)
    /// Run the command named here with these flags.
    case run(command: String, Arguments)

    package static func == (lhs: CommandLineRequest, rhs: CommandLineRequest) -> Bool {
        switch (lhs, rhs) {
        case (.show(let a), .show(let b)): a == b
        case (.usageError(let a), .usageError(let b)): a == b
        case (.run(let a, _), .run(let b, _)): a == b
        default: false
        }
    }

    /// Parses `arguments` (without the program name) against `commands`; the first command is the default.
    package static func parse(
        _ arguments: [String],
        commands: [any DemoCommand.Type],
        overview: String,
        version: String
    ) -> CommandLineRequest {
        if arguments == ["--version"] { return .show(version) }
        if let first = arguments.first, ["--help", "-h", "help"].contains(first) { return .show(overview) }
        guard let fallback = commands.first else { return .usageError(UsageError("no commands")) }
        let name = arguments.first.flatMap { $0.hasPrefix("-") ? nil : $0 } ?? fallback.name
        let rest = arguments.first == name ? Array(arguments.dropFirst()) : arguments
        guard let command = commands.first(where: { $0.name == name }) else {
            return .usageError(UsageError("unknown command '\(name)'"))
        }
        if rest.contains("--help") || rest.contains("-h") { return .show(command.usage + "\n" + command.details) }
        do {
            return .run(
                command: name,
                try Arguments(command: name, rest, valueFlags: command.valueFlags, switchFlags: command.switchFlags)
            )
        } catch let error as UsageError {
            return .usageError(error)
        } catch {
            return .usageError(UsageError(String(describing: error)))
        }
    }

    /// The synopsis of every command, one per line, for the overview.
    package static func synopsis(of commands: [any DemoCommand.Type]) -> String {
        commands.map { "  " + $0.usage }.joined(separator: "\n")
    }
}
