import DemoRuntime
import DemoCommandLine
import PostgresAdapter
import ResourceKit
import ResourceKitIO
import ResourceKitPrometheus
import SocketAdapter

/// `resource-demo serve [--listen HOST:PORT] [--metrics HOST:PORT] [--postgres URL] [--pool N] [--max-connections N]
/// [--reactors N]`: a line protocol server on loopback. Each client is a resource scope; a client that disconnects
/// while its command runs has its query cancelled on the server at once. With `--reactors N` each client runs on one
/// reactor of a group of N (its task prefers it as executor, its socket waits on it) and leases from that reactor's
/// shard of a `PostgresShardedPool`: a reactor per core, nothing crosses threads per command.
///
/// Protocol (one command per line, answers end with `\n`):
/// `PING` → `PONG`; `SLEEP <seconds>` → `SELECT pg_sleep($1)` → `OK`; `LOCK <key>` → waits for the advisory lock
/// `key` (`SELECT pg_advisory_xact_lock($1)`, released when the statement ends) → `OK`; `SERIES <n>` →
/// `generate_series(1, $1)` one number per line, then `OK`; `QUIT` → `BYE` and close. Anything else →
/// `ERR <reason>`, and the connection stays usable; a line over 4 KiB → `ERR line too long`, and the connection is
/// closed. No SQL is ever taken from the network.
enum ServeCommand: Sendable {
    static let valueFlags: Set<String> = [
        "--listen", "--metrics", "--postgres", "--pool", "--max-connections", "--reactors", "--grace",
    ]

    struct Configuration: Sendable {
        var host = "127.0.0.1"
        var port = 7070
        var poolSize = 4
        var maxConnections = 64
        /// Clients on a group of this many reactors with a sharded pool; `nil`: the cooperative pool, one pool.
        var reactors: Int?
        /// Where `GET /metrics` and `GET /resources` are served (off unless `--metrics` is given).
        var metrics: (host: String, port: Int)?
        /// After SIGTERM or SIGINT, running commands have this long to finish (`--grace SECONDS`).
        var grace: Duration = .seconds(10)
    }

    static func run(_ arguments: Arguments) async throws -> Int32 {
        var configuration = Configuration()
        if let listen = try arguments.hostPort("--listen") { (configuration.host, configuration.port) = listen }
        configuration.poolSize = try arguments.integer("--pool", in: 1...256) ?? configuration.poolSize
        configuration.maxConnections =
            try arguments.integer("--max-connections", in: 1...10_000) ?? configuration.maxConnections
        configuration.metrics = try arguments.hostPort("--metrics")
        configuration.reactors = try arguments.integer("--reactors", in: 1...64)
        if let grace = try arguments.integer("--grace", in: 0...3600) { configuration.grace = .seconds(grace) }
        return try await PostgresTarget.with(arguments.value("--postgres")) { conninfo in
            let group = configuration.reactors.map { IOReactorGroup(count: $0, name: "rk.serve") }
            defer { group?.shutdown() }
            let pool: any ConnectionSource =
                if let group {
                    try PostgresShardedPool(conninfo: conninfo, maxConnections: configuration.poolSize, reactors: group)
                } else {
                    try PostgresPool(conninfo: conninfo, maxConnections: configuration.poolSize)
                }
            do {
                try await serve(configuration, pool: pool, reactors: group)
            } catch {
                try? await withCancellationShield(timeout: .seconds(10)) { await pool.shutdown() }
                throw error
            }
            try? await withCancellationShield(timeout: .seconds(10)) { await pool.shutdown() }
            return 0
        }
    }

    static func serve(
        _ configuration: Configuration, pool: any ConnectionSource, reactors: IOReactorGroup?
    ) async throws {
        try await withResourceScope("serve") { scope in
            let listener = try await SocketListener.bind(host: configuration.host, port: configuration.port, in: scope)
            Console.line("listening on \(configuration.host):\(listener.port)")
            var metricsListener: SocketListener?
            if let metrics = configuration.metrics {
                let bound = try await SocketListener.bind(host: metrics.host, port: metrics.port, in: scope)
                Console.line("metrics on http://\(metrics.host):\(bound.port)/metrics")
                metricsListener = bound
            }
            let clients = Locked(0)
            // SIGTERM or SIGINT: no new connections, idle ones closed, running commands answered within the grace,
            // then cancelled (and answered `ERR`); a second signal ends the grace at once. The process exits 0.
            let shutdown = GracefulShutdown(grace: configuration.grace)
            SignalCanceller.graceful.withLock {
                $0 = { count in
                    if count == 1 {
                        // Begun before it is announced: a reader of the line knows the shutdown is under way.
                        shutdown.begin()
                        Console.line(
                            "resource-demo serve: shutting down: running commands have \(configuration.grace); "
                                + "a second signal ends them now")
                    } else {
                        shutdown.endNow()
                    }
                }
            }
            defer { SignalCanceller.graceful.withLock { $0 = nil } }
            // Out of descriptors, accepting pauses and resumes: one line each, never a line per failed accept.
            let report: @Sendable (SocketServer.Event) -> Void = { Console.line("resource-demo serve: \($0)") }
            try await withThrowingDiscardingTaskGroup { group in
                if let metricsListener {
                    group.addTask {
                        try await MetricsEndpoint.serve(
                            metricsListener, configuration: .init(onEvent: report, shutdown: shutdown))
                    }
                }
                // Each client in a scope of its own from its accept on (and, with --reactors, on the next reactor in
                // turn, where its socket waits too).
                let server = SocketServer.Configuration(reactors: reactors, onEvent: report, shutdown: shutdown)
                try await SocketServer.serve(listener, configuration: server) { connection, _ in
                    let admitted = clients.withLock { count -> Bool in
                        guard count < configuration.maxConnections else { return false }
                        count += 1
                        return true
                    }
                    guard admitted else {
                        // Best effort: the refused client may be gone, or the server stopping.
                        try? await connection.write("ERR busy\n")
                        return
                    }
                    defer { clients.withLock { $0 -= 1 } }
                    await ClientSession(connection: connection, pool: pool).run()
                }
            }
        }
    }
}
