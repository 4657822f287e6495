import EmbeddedPostgres
import PostgresActivity
import PostgresAdapter
import ResourceKit
import ResourceKitIO
import SocketAdapter
import Testing
import TodoService

/// The example server, in-process against a throwaway cluster over real loopback sockets: answers, a request
/// deadline, a client's disconnect stopping its query on the server, a graceful shutdown, and `/metrics`.
@Suite(.serialized) struct TodoServerTests {
    /// A running server: its ports, its shutdown, and a connection that watches the cluster's backends.
    struct Running {
        let port: Int
        let metricsPort: Int
        let shutdown: GracefulShutdown
        let probe: PostgresActivityProbe
    }

    /// Starts a cluster and the server on it, runs `body`, then shuts both down (the server gracefully, so that
    /// `body` may have begun the shutdown itself). Returns what `TodoServer.run` ended with.
    static func withServer(
        deadline: Duration = .milliseconds(500), grace: Duration = .seconds(5), _ body: (Running) async throws -> Void
    ) async throws {
        let cluster = try await EmbeddedPostgres.start()
        do {
            let registry = ResourceRegistry()
            let pool = try PostgresPool(conninfo: cluster.conninfo, maxConnections: 4, registry: registry)
            let service = TodoService(pool: pool, requestDeadline: deadline)
            try await service.prepare()
            let shutdown = GracefulShutdown(grace: grace)
            try await withResourceScope("test") { scope in
                let listener = try await SocketListener.bind(port: 0, in: scope)
                let metrics = try await SocketListener.bind(port: 0, in: scope)
                let observer = try await PostgresConnection.connect(cluster.conninfo, in: scope)
                let server = Task {
                    try await TodoServer.run(
                        service, on: listener, metrics: metrics, shutdown: shutdown, registry: registry)
                }
                do {
                    try await body(
                        Running(
                            port: listener.port, metricsPort: metrics.port, shutdown: shutdown,
                            probe: PostgresActivityProbe(observer: observer, pollInterval: .milliseconds(2))))
                } catch {
                    server.cancel()
                    _ = await server.result
                    throw error
                }
                shutdown.begin()
                try await server.value
            }
            await pool.shutdown()
        } catch {
            await cluster.stop()
            throw error
        }
        await cluster.stop()
    }

    /// Sends `line` on `connection` and reads the answer.
    static func ask(_ connection: SocketConnection, _ line: String) async throws -> String? {
        try await connection.write(line + "\n")
        return try await connection.readLine()
    }

    @Test func answersRequestsWithADeadlineAndCountsThem() async throws {
        try await Self.withServer { server in
            try await withResourceScope("client") { scope in
                let client = try await SocketConnection.connect(host: "127.0.0.1", port: server.port, in: scope)
                #expect(try await Self.ask(client, "ADD buy milk")?.hasPrefix("OK ") == true)
                #expect(try await Self.ask(client, "LIST") == "OK 1: buy milk")
                #expect(try await Self.ask(client, "SEARCH milk") == "OK 1")
                #expect(try await Self.ask(client, "FROB")?.hasPrefix("ERR unknown request") == true)
                #expect(try await Self.ask(client, "SLEEP lots")?.hasPrefix("ERR SLEEP takes") == true)
                // The request deadline (500 ms) stops a 5 s statement, on the server too.
                let start = ContinuousClock.now
                #expect(try await Self.ask(client, "SLEEP 5") == "ERR deadline exceeded")
                let took = ContinuousClock.now - start
                #expect(took >= .milliseconds(490) && took < .seconds(3), "answered after \(took)")
                #expect(try await server.probe.waitUntil(.notActive(.running("pg_sleep")), within: .seconds(5)) != nil)
                #expect(try await Self.ask(client, "SEARCH milk") == "OK 1", "the connection is still usable")
                // An over-long line is answered, then the connection closes.
                #expect(
                    try await Self.ask(client, String(repeating: "x", count: 5000))?.hasPrefix("ERR line too long")
                        == true)
            }
            let metrics = try await Self.get(server.metricsPort, "/metrics")
            #expect(
                metrics.contains(
                    #"resourcekit_operations_total{kind="postgres.connection",outcome="deadline_exceeded"} 1"#))
            #expect(metrics.contains(#"resourcekit_operations_total{kind="postgres.connection",outcome="completed"} "#))
        }
    }

    @Test func aClientThatLeavesHasItsQueryStoppedOnTheServer() async throws {
        try await Self.withServer(deadline: .seconds(60)) { server in
            try await withResourceScope("client") { scope in
                let client = try await SocketConnection.connect(host: "127.0.0.1", port: server.port, in: scope)
                try await client.write("SLEEP 30\n")
                #expect(try await server.probe.waitUntil(.active(.running("pg_sleep")), within: .seconds(10)) != nil)
                try await client.close()
            }
            let gone = try await server.probe.waitUntil(.notActive(.running("pg_sleep")), within: .seconds(5))
            #expect(gone != nil, "the query ran on after its client left")
        }
    }

    @Test func aShutdownAnswersWhatRunsAndRefusesNewClients() async throws {
        try await Self.withServer(deadline: .seconds(60), grace: .seconds(1)) { server in
            try await withResourceScope("clients") { scope in
                let quick = try await SocketConnection.connect(host: "127.0.0.1", port: server.port, in: scope)
                let slow = try await SocketConnection.connect(host: "127.0.0.1", port: server.port, in: scope)
                try await quick.write("SLEEP 0.4\n")
                try await slow.write("SLEEP 30\n")
                _ = try await PostgresActivityProbe.poll(every: .milliseconds(2), within: .seconds(10)) {
                    try await server.probe.backends(.running("pg_sleep")).count == 2
                }
                server.shutdown.begin()
                #expect(try await quick.readLine() == "OK slept", "finished within the grace: answered as usual")
                #expect(
                    try await slow.readLine() == "ERR server shutting down", "past the grace: answered, then closed")
                #expect(try await slow.readLine() == nil)
                await #expect(throws: SocketError.self) {
                    try await withResourceScope("late") { late in
                        _ = try await SocketConnection.connect(host: "127.0.0.1", port: server.port, in: late)
                    }
                }
            }
            #expect(try await server.probe.waitUntil(.notActive(.running("pg_sleep")), within: .seconds(5)) != nil)
        }
    }

    /// One HTTP GET, the whole response read to its end.
    static func get(_ port: Int, _ path: String) async throws -> String {
        try await withResourceScope("http") { scope in
            let connection = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
            try await connection.write("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            var bytes: [UInt8] = []
            while let chunk = try await connection.receive(upTo: 65_536) { bytes += chunk }
            return String(decoding: bytes, as: UTF8.self)
        }
    }
}
