import DemoCommandLine

/// Every command of `resource-demo`, once: the overview, `COMMAND --help`, the flags and the dispatch all
/// come from this table (and `CommandTableTests` checks that README lists the same synopses).
enum CommandTable {
    static let all: [any DemoCommand.Type] = [
        Tour.self, PgCommand.self, SocketCommand.self, FileCommand.self, LatestCommand.self, ListenCommand.self,
        CopyCommand.self, ServeCommand.self, BenchCommand.self,
    ]

    static var overview: String {
        """
        resource-demo: ResourceKit's tour, one command per resource kind, a server and the benchmark.

        usage:
        \(CommandLineRequest.synopsis(of: all))
          resource-demo --help | --version | COMMAND --help

        DURATION: 500us, 250ms, 2s, 1.5s. Without --postgres, DATABASE_URL is used, else a throwaway cluster is
        started and stopped. Exit status: 0 success (also a run --cancel-after cancelled as asked), 1 failure,
        2 usage error, 130 SIGINT, 143 SIGTERM (every resource torn down first).
        """
    }
}

extension Tour: DemoCommand {
    static let name = "tour"
    static let usage = "resource-demo [tour] [--postgres URL] [--json]"
    static let details = """
          A walk through socket, FIFO and Postgres cancellation and the latest-wins pattern, ending with a table:
          resource, what tore it down, cancel-to-return latency, and what the other side confirmed.
        """
    static let valueFlags: Set<String> = ["--postgres"]
    static let switchFlags: Set<String> = ["--json"]
}

extension PgCommand: DemoCommand {
    static let name = "pg"
    static let usage =
        "resource-demo pg     --sql SQL [--cancel-after DURATION] [--deadline DURATION] [--postgres URL] [--json]"
    static let details = """
          Runs one statement and prints its rows. --cancel-after cancels the task: a cancel request stops the
          query on the server, and the command reports the backend's state from pg_stat_activity. --deadline
          runs the statement under a deadline, which it also carries to the server as its statement_timeout.
          JSON: {"outcome", "cancel_to_return_us", "backend_pid", "backend_state", "rows", "command_tag", ...}
        """
    static let switchFlags: Set<String> = ["--json"]
}

enum SocketCommand: DemoCommand {
    static let name = "socket"
    static let usage = "resource-demo socket --connect HOST:PORT [--cancel-after DURATION] [--json]"
    static let details = """
          Connects and copies what the peer sends to stdout until it closes, or until the cancel.
          JSON: {"outcome", "cancel_to_return_us", "bytes", ...}
        """
    static let valueFlags: Set<String> = ["--connect", "--cancel-after"]
    static let switchFlags: Set<String> = ["--json"]
    static func run(_ arguments: Arguments) async throws -> Int32 { try await StreamCommands.socket(arguments) }
}

enum FileCommand: DemoCommand {
    static let name = "file"
    static let usage = "resource-demo file   --path PATH [--cancel-after DURATION] [--json]"
    static let details = """
          Copies a regular file (chunked reads on the blocking pool), a FIFO or a character device (through the
          reactor) to stdout until its end, or until the cancel.
          JSON: {"outcome", "cancel_to_return_us", "bytes", ...}
        """
    static let valueFlags: Set<String> = ["--path", "--cancel-after"]
    static let switchFlags: Set<String> = ["--json"]
    static func run(_ arguments: Arguments) async throws -> Int32 { try await StreamCommands.file(arguments) }
}

extension LatestCommand: DemoCommand {
    static let name = "latest"
    static let usage = "resource-demo latest [--ids a,ab,abc,...] [--debounce DURATION] [--postgres URL] [--json]"
    static let details = """
          Feeds the ids 50 ms apart to a latest-wins task whose work is a 200 ms query: each new id cancels the
          previous query on the server; with --debounce only a stable id reaches the server.
          JSON: one {"event": "update", ...} per id, then {"outcome", "committed", "server_executions", ...}
        """
    static let switchFlags: Set<String> = ["--json"]
}

enum ListenCommand: DemoCommand {
    static let name = "listen"
    static let usage = "resource-demo listen --channel NAME [--cancel-after DURATION] [--postgres URL] [--json]"
    static let details = """
          LISTEN on a channel and print each notification (channel, payload, sender pid) until Ctrl-C or
          --cancel-after. Stopping ends the listening session on the server at once.
          JSON: one {"event": "notification", ...} per notification, then {"outcome", "dropped", ...}
        """
    static let valueFlags = BulkCommands.listenFlags
    static let switchFlags: Set<String> = ["--json"]
    static func run(_ arguments: Arguments) async throws -> Int32 { try await BulkCommands.listen(arguments) }
}

enum CopyCommand: DemoCommand {
    static let name = "copy"
    static let usage = "resource-demo copy   [--rows N] [--cancel-after DURATION] [--postgres URL] [--json]"
    static let details = """
          COPY FROM STDIN of N generated rows (default 1,000,000) into a temporary table. With --cancel-after
          the COPY is cancelled mid-way (CopyFail and a cancel request), and the server's count(*) shows that
          nothing was committed. JSON: {"outcome", "rows_sent", "rows_in_table", ...}
        """
    static let valueFlags = BulkCommands.copyFlags
    static let switchFlags: Set<String> = ["--json"]
    static func run(_ arguments: Arguments) async throws -> Int32 { try await BulkCommands.copy(arguments) }
}

extension ServeCommand: DemoCommand {
    static let name = "serve"
    static let usage =
        """
        resource-demo serve  [--listen HOST:PORT] [--metrics HOST:PORT] [--postgres URL] [--pool N] \
        [--max-connections N] [--reactors N] [--grace SECONDS]
        """
    static let details = """
          A line protocol server (default 127.0.0.1:7070; port 0 picks a free one, printed on stdout).
          --metrics: also serve GET /metrics (Prometheus text format) and GET /resources (live resources, JSON)
          over HTTP there (port 0 picks one; its URL is printed on stdout). Off by default.
          PING -> PONG; SLEEP <seconds> -> SELECT pg_sleep($1), OK; LOCK <key> -> waits for the advisory lock
          key (pg_advisory_xact_lock), OK; SERIES <n> -> 1..n one per line, OK; QUIT -> BYE.
          Anything else -> ERR <reason>. A line over 4 KiB -> ERR line too long, then close.
          A client that disconnects mid-command has its query cancelled on the server at once.
          SIGTERM/SIGINT: stop accepting, answer commands that finish within --grace (default 10 s), answer
          ERR to the rest, exit 0; a second signal ends the grace at once.
          --pool: Postgres connections (default 4); --max-connections: clients (default 64; extras get ERR busy).
          --reactors N (1 to 64): each client runs on one of N reactor threads, its socket and its share of the
          pool (a pool per reactor) with it; without it clients run on Swift's cooperative pool.
        """
    static let switchFlags: Set<String> = []
}

enum BenchCommand: DemoCommand {
    static let name = "bench"
    static let usage = "resource-demo bench  [--quick] [--core] [--json] [--postgres URL] [--report FILE.svg]"
    static let details = """
          Cancel-to-return latencies and throughput beside their references. Runs the separate resource-bench
          executable (build it with: swift build -c release --product resource-bench), with these flags.
          --core: only the core's figures (reads, scope overhead, scale); no Postgres.
          --report: also draw every latency figure's distribution beside its references (log scale) as SVG.
        """
    static let valueFlags: Set<String> = ["--postgres", "--report"]
    static let switchFlags: Set<String> = ["--quick", "--core", "--json"]
    static func run(_ arguments: Arguments) async throws -> Int32 {
        BenchEntry.replaceProcess(with: Array(CommandLine.arguments.drop { $0 != "bench" }.dropFirst()))
    }
}
