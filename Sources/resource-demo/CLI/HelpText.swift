/// The commands, their flags and their help.
enum HelpText {
    struct Command {
        let valueFlags: Set<String>
        let switchFlags: Set<String>
        let help: String
    }

    static let overview = """
        resource-demo: ResourceKit's tour, one command per resource kind, a server and the benchmark.

        usage:
          resource-demo [tour] [--postgres URL] [--json]
          resource-demo pg     --sql SQL [--cancel-after DURATION] [--postgres URL] [--json]
          resource-demo socket --connect HOST:PORT [--cancel-after DURATION] [--json]
          resource-demo file   --path PATH [--cancel-after DURATION] [--json]
          resource-demo latest [--ids a,ab,abc,...] [--debounce DURATION] [--postgres URL] [--json]
          resource-demo listen --channel NAME [--cancel-after DURATION] [--postgres URL] [--json]
          resource-demo copy   [--rows N] [--cancel-after DURATION] [--postgres URL] [--json]
          resource-demo serve  [--listen HOST:PORT] [--metrics HOST:PORT] [--postgres URL] [--pool N] [--max-connections N]
          resource-demo bench  [--quick] [--core] [--json] [--postgres URL] [--report FILE.svg]
          resource-demo --help | --version | COMMAND --help

        DURATION: 500us, 250ms, 2s, 1.5s. Without --postgres, DATABASE_URL is used, else a throwaway cluster is
        started and stopped. Exit status: 0 success (also a run --cancel-after cancelled as asked), 1 failure,
        2 usage error, 130 SIGINT, 143 SIGTERM (every resource torn down first).
        """

    static let commands: [String: Command] = [
        "tour": Command(
            valueFlags: ["--postgres"], switchFlags: ["--json"],
            help: """
                resource-demo [tour] [--postgres URL] [--json]
                  A walk through socket, FIFO and Postgres cancellation and the latest-wins pattern, ending with a table:
                  resource, what tore it down, cancel-to-return latency, and what the other side confirmed.
                """),
        "pg": Command(
            valueFlags: PgCommand.valueFlags, switchFlags: ["--json"],
            help: """
                resource-demo pg --sql SQL [--cancel-after DURATION] [--postgres URL] [--json]
                  Runs one statement and prints its rows. --cancel-after cancels the task: a cancel request stops the
                  query on the server, and the command reports the backend's state from pg_stat_activity.
                  JSON: {"outcome", "cancel_to_return_us", "backend_pid", "backend_state", "rows", "command_tag", ...}
                """),
        "socket": Command(
            valueFlags: ["--connect", "--cancel-after"], switchFlags: ["--json"],
            help: """
                resource-demo socket --connect HOST:PORT [--cancel-after DURATION] [--json]
                  Connects and copies what the peer sends to stdout until it closes, or until the cancel.
                  JSON: {"outcome", "cancel_to_return_us", "bytes", ...}
                """),
        "file": Command(
            valueFlags: ["--path", "--cancel-after"], switchFlags: ["--json"],
            help: """
                resource-demo file --path PATH [--cancel-after DURATION] [--json]
                  Copies a regular file (chunked reads on the blocking pool), a FIFO or a character device (through the
                  reactor) to stdout until its end, or until the cancel.
                  JSON: {"outcome", "cancel_to_return_us", "bytes", ...}
                """),
        "latest": Command(
            valueFlags: LatestCommand.valueFlags, switchFlags: ["--json"],
            help: """
                resource-demo latest [--ids a,ab,abc,...] [--debounce DURATION] [--postgres URL] [--json]
                  Feeds the ids 50 ms apart to a latest-wins task whose work is a 200 ms query: each new id cancels the
                  previous query on the server; with --debounce only a stable id reaches the server.
                  JSON: one {"event": "update", ...} per id, then {"outcome", "committed", "server_executions", ...}
                """),
        "serve": Command(
            valueFlags: ServeCommand.valueFlags, switchFlags: [],
            help: """
                resource-demo serve [--listen HOST:PORT] [--metrics HOST:PORT] [--postgres URL] [--pool N] [--max-connections N]
                  A line protocol server (default 127.0.0.1:7070; port 0 picks a free one, printed on stdout).
                  --metrics: also serve GET /metrics (Prometheus text format) and GET /resources (live resources, JSON)
                  over HTTP there (port 0 picks one; its URL is printed on stdout). Off by default.
                  PING -> PONG; SLEEP <seconds> -> SELECT pg_sleep($1), OK; SERIES <n> -> 1..n one per line, OK;
                  QUIT -> BYE. Anything else -> ERR <reason>. A line over 4 KiB -> ERR line too long, then close.
                  A client that disconnects mid-command has its query cancelled on the server at once.
                  --pool: Postgres connections (default 4); --max-connections: clients (default 64; extras get ERR busy).
                """),
        "listen": Command(
            valueFlags: BulkCommands.listenFlags, switchFlags: ["--json"],
            help: """
                resource-demo listen --channel NAME [--cancel-after DURATION] [--postgres URL] [--json]
                  LISTEN on a channel and print each notification (channel, payload, sender pid) until Ctrl-C or
                  --cancel-after. Stopping ends the listening session on the server at once.
                  JSON: one {"event": "notification", ...} per notification, then {"outcome", "dropped", ...}
                """),
        "copy": Command(
            valueFlags: BulkCommands.copyFlags, switchFlags: ["--json"],
            help: """
                resource-demo copy [--rows N] [--cancel-after DURATION] [--postgres URL] [--json]
                  COPY FROM STDIN of N generated rows (default 1,000,000) into a temporary table. With --cancel-after
                  the COPY is cancelled mid-way (CopyFail and a cancel request), and the server's count(*) shows that
                  nothing was committed. JSON: {"outcome", "rows_sent", "rows_in_table", ...}
                """),
        "bench": Command(
            valueFlags: ["--postgres", "--report"], switchFlags: ["--quick", "--core", "--json"],
            help: """
                resource-demo bench [--quick] [--core] [--json] [--postgres URL] [--report FILE.svg]
                  Cancel-to-return latencies and throughput beside their references. Build with -c release.
                  --core: only the core's figures (reads, scope overhead, scale); no Postgres.
                  --report: also draw every latency figure's distribution beside its references (log scale) as SVG.
                """),
    ]
}
