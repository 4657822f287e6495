import Foundation
import Glibc
import PostgresAdapter
import PostgresActivity
import PostgresTestSupport
import ResourceKit
import SocketAdapter
import ResourceKitTesting
import TestSupport
import Testing

/// `serve --metrics`: the registry for operators, over HTTP, from the real binary.
@Suite struct MetricsEndpointTests {
    /// One HTTP/1.1 request over a fresh loopback connection; the whole response, read to EOF. The connection
    /// is closed when the response was read (in a scope of its own), as a client does.
    static func request(_ port: Int, _ raw: String, in scope: ResourceScope) async throws -> (status: Int, body: String)
    {
        let bytes = try await withResourceScope("request") { requestScope in
            let connection = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: requestScope)
            try await connection.write(raw)
            var bytes: [UInt8] = []
            while let chunk = try await connection.receive(upTo: 65_536) { bytes += chunk }
            return bytes
        }
        let text = String(decoding: bytes, as: UTF8.self)
        let status = text.split(separator: " ", maxSplits: 2).dropFirst().first.flatMap { Int($0) } ?? 0
        let body = text.range(of: "\r\n\r\n").map { String(text[$0.upperBound...]) } ?? ""
        return (status, body)
    }

    static func get(_ port: Int, _ path: String, in scope: ResourceScope) async throws -> (status: Int, body: String) {
        try await request(port, "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", in: scope)
    }

    /// The sum of the sample lines starting with `prefix` (0 if none).
    static func sample(_ text: String, _ prefix: String) -> Double {
        text.split(separator: "\n").filter { $0.hasPrefix(prefix) }
            .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }.reduce(0, +)
    }

    /// Waits until a session of that serve process runs a query (its `SLEEP` reached the server).
    static func waitUntilServeQueries(_ application: String, observer: PostgresConnection) async throws {
        guard
            try await PostgresActivityProbe(observer: observer).waitUntil(
                .active(.running("pg_sleep", application: application)), within: .seconds(20)) != nil
        else {
            throw ConditionNeverHeld(description: "the SLEEP never reached the server")
        }
    }

    /// The sample of the cancel requests that the pool's connections sent.
    static let postgresCancels = #"resourcekit_adapter_events_total{event="postgres.cancel."#

    /// Starts `serve --metrics`; its Postgres sessions carry `application` as their application name, so that
    /// its queries can be told from other tests' on the shared server.
    static func startServe(_ conninfo: String, application: String) async throws -> (
        server: DemoProcess, port: Int, metrics: Int
    ) {
        let server = try DemoProcess([
            "serve", "--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--postgres",
            conninfo + " application_name=\(application)",
        ])
        let port = try #require(
            Int(try await server.line(containing: "listening on ").split(separator: ":").last ?? ""))
        let url = try await server.line(containing: "metrics on http://")
        let metrics = try #require(Int(url.split(separator: ":").last?.split(separator: "/").first ?? ""))
        return (server, port, metrics)
    }

    @Test func metricsResourcesAndBadInput() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let application = "rk-metrics-\(UInt32.random(in: 0...UInt32.max))"
        let (server, port, metrics) = try await Self.startServe(conninfo, application: application)
        try await withResourceScope("metrics", registry: ResourceRegistry()) { scope in
            let before = try await Self.get(metrics, "/metrics", in: scope)
            #expect(before.status == 200)
            #expect(before.body.contains("# TYPE resourcekit_resources_live gauge"))

            // A client holding SLEEP 30 shows in /resources, then leaves: its cancel is counted.
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            try await withResourceScope("client") { clientScope in
                let client = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: clientScope)
                try await client.write("SLEEP 30\n")
                try await Self.waitUntilServeQueries(application, observer: observer)
                let resources = try await Self.get(metrics, "/resources", in: scope)
                #expect(resources.status == 200)
                let items = try #require(
                    try JSONSerialization.jsonObject(with: Data(resources.body.utf8)) as? [[String: Any]])
                let kinds = Set(items.compactMap { $0["kind"] as? String })
                #expect(kinds.isSuperset(of: ["socket", "postgres.connection", "socket.listener"]), "\(kinds)")
                #expect(
                    items.allSatisfy {
                        $0["age_seconds"] is Double && $0["scope"] is String && $0.keys.contains("cancellation")
                    })
                print("GET /resources while a client holds SLEEP 30:\n\(resources.body)")
                client.resetConnection()
            }
            var after = (status: 0, body: "")
            let deadline = ContinuousClock.now + .seconds(10)
            repeat {
                after = try await Self.get(metrics, "/metrics", in: scope)
            } while Self.sample(after.body, Self.postgresCancels)
                <= Self.sample(before.body, Self.postgresCancels) && ContinuousClock.now < deadline
            #expect(
                Self.sample(after.body, Self.postgresCancels)
                    > Self.sample(before.body, Self.postgresCancels))
            print("GET /metrics (head):\n\(after.body.split(separator: "\n").prefix(12).joined(separator: "\n"))")

            // Bad input: each gets its status and a close; the endpoint keeps answering.
            #expect(try await Self.get(metrics, "/nope", in: scope).status == 404)
            #expect(try await Self.request(metrics, "POST /metrics HTTP/1.1\r\n\r\n", in: scope).status == 405)
            #expect(try await Self.request(metrics, "garbage\r\n\r\n", in: scope).status == 400)
            #expect(try await Self.request(metrics, "\u{00}\u{ff}\u{fe}\n\n", in: scope).status == 400)
            #expect(
                try await Self.request(
                    metrics, "GET /" + String(repeating: "a", count: 10_000) + " HTTP/1.1\r\n\r\n", in: scope
                ).status == 400)
            let headerFlood = "GET /metrics HTTP/1.1\r\n" + String(repeating: "X-A: b\r\n", count: 100) + "\r\n"
            #expect(try await Self.request(metrics, headerFlood, in: scope).status == 400)
            // A client that sends nothing is closed when its 5 s deadline passes.
            // (Bounded: if the server never closed it, the test's own 30 s deadline fails it instead of hanging.)
            let waited = ContinuousClock.now
            try await withResourceScope("silent", deadline: .now + .seconds(30)) { silentScope in
                let silent = try await SocketConnection.connect(host: "127.0.0.1", port: metrics, in: silentScope)
                #expect(try await silent.receive(upTo: 1024) == nil)
            }
            #expect(ContinuousClock.now - waited < .seconds(5) + TimingBound.singleShot)
            // Many at once: every one is answered (200, or 503 past the limit), and the endpoint still works.
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<100 { group.addTask { try await Self.get(metrics, "/metrics", in: scope).status } }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.count == 100 && statuses.allSatisfy { $0 == 200 || $0 == 503 }, "\(statuses)")
            #expect(try await Self.get(metrics, "/metrics", in: scope).status == 200)
        }
        server.signal(SIGTERM)
        #expect(try await server.exitStatus() == 0, "serve shuts down gracefully")
    }

    /// A real Prometheus scrapes `serve --metrics` every second; after a client's query was cancelled, the
    /// cancels counted by the adapter went up, read back through Prometheus's HTTP API.
    @Test func aRealPrometheusScrapesTheEndpoint() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/prometheus") else {
            Issue.record("prometheus is not installed (apt-get install prometheus; Scripts/test does it)")
            return
        }
        let conninfo = try await TestDatabase.conninfo()
        let application = "rk-metrics-\(UInt32.random(in: 0...UInt32.max))"
        let (server, port, metrics) = try await Self.startServe(conninfo, application: application)
        let directory = try TestFixtures.directory("prometheus")
        let config = """
            global:
              scrape_interval: 1s
            scrape_configs:
              - job_name: resourcekit
                static_configs:
                  - targets: ['127.0.0.1:\(metrics)']
            """
        try config.write(toFile: directory + "/prometheus.yml", atomically: true, encoding: .utf8)
        let prometheusPort = BackgroundProcess.freePort()
        let prometheus = try await BackgroundService.start(
            [
                "/usr/bin/prometheus", "--config.file=\(directory)/prometheus.yml",
                "--storage.tsdb.path=\(directory)/data",
                "--web.listen-address=127.0.0.1:\(prometheusPort)",
            ],
            directory: directory, log: "prometheus.log", port: prometheusPort, stopSignal: SIGTERM
        )
        let query = "sum(resourcekit_adapter_events_total%7Bevent%3D~%22postgres.cancel.%2A%22%7D)"
        try await withResourceScope("prometheus", registry: ResourceRegistry()) { scope in
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            try await withResourceScope("client") { clientScope in
                let client = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: clientScope)
                try await client.write("SLEEP 30\n")
                try await Self.waitUntilServeQueries(application, observer: observer)
                client.resetConnection()
            }
            var value = 0.0
            var answer = ""
            let deadline = ContinuousClock.now + .seconds(30)
            while value < 1, ContinuousClock.now < deadline {
                answer = try await Self.get(prometheusPort, "/api/v1/query?query=\(query)", in: scope).body
                let json = try? JSONSerialization.jsonObject(with: Data(answer.utf8)) as? [String: Any]
                let result = ((json?["data"] as? [String: Any])?["result"] as? [[String: Any]])?.first
                value = ((result?["value"] as? [Any])?.last as? String).flatMap(Double.init) ?? 0
                if value < 1 { try await Task.sleep(for: .milliseconds(250)) }  // Prometheus scrapes once a second
            }
            print(
                """
                Prometheus \
                /api/v1/query?query=sum(resourcekit_adapter_events_total{event=~\"postgres.cancel.*\"}): \(answer)
                """
            )
            #expect(value >= 1, "Prometheus never saw the cancel: \(answer)")
        }
        await prometheus.stop()
        server.signal(SIGTERM)
        #expect(try await server.exitStatus() == 0, "serve shuts down gracefully")
    }
}
