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

/// `serve` end to end: a real server process, real clients on loopback, the database observed directly.
@Suite struct ServeTests {
    /// Both shapes: clients on the cooperative pool with one pool, and (`--reactors 2`) clients on two reactors,
    /// each with its socket and its shard of the pool.
    @Test(arguments: [[String](), ["--reactors", "2"]])
    func disconnectCancelsTheQueryAndBadInputNeverHurtsOtherClients(shape: [String]) async throws {
        let conninfo = try await TestDatabase.conninfo()
        // Its sessions carry their own application name: other tests run `serve` against the same server.
        let application = "rk-serve-\(UInt32.random(in: 0...UInt32.max))"
        let server = try DemoProcess(
            [
                "serve", "--listen", "127.0.0.1:0", "--postgres", conninfo + " application_name=\(application)",
                "--pool", "2",
            ] + shape)
        let listening = try await server.line(containing: "listening on ")
        let port = try #require(Int(listening.split(separator: ":").last ?? ""))

        try await withResourceScope("clients", registry: ResourceRegistry()) { scope in
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            let steady = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
            try await steady.write("PING\n")
            #expect(try await steady.readLine() == "PONG")

            // A client sends SLEEP 30 and disconnects: its backend goes idle promptly (`TimingBound.singleShot`).
            try await withResourceScope("leaving") { leaving in
                let client = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: leaving)
                try await client.write("SLEEP 30\n")
                let pid = try await Self.sleepingBackend(observer: observer, application: application)
                client.resetConnection()
                #expect(try await TestDatabase.waitUntilNotActive(pid, observer: observer) != nil)
            }

            // Bad commands get ERR and the connection stays usable.
            try await steady.write("FROB\n")
            #expect(try await steady.readLine()?.hasPrefix("ERR ") == true)
            try await steady.write("SLEEP forever\n")
            #expect(try await steady.readLine()?.hasPrefix("ERR ") == true)
            try await steady.write([0xff, 0x00, 0xfe, 0x0a])
            #expect(try await steady.readLine()?.hasPrefix("ERR ") == true)

            // A line over 4 KiB: ERR, then the server closes that connection.
            let flooder = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
            try await flooder.write(String(repeating: "x", count: 5000) + "\n")
            #expect(try await flooder.readLine() == "ERR line too long")
            #expect(try await flooder.readLine() == nil)

            // The steady client still works: a short series, then QUIT.
            try await steady.write("SERIES 5\n")
            var numbers: [String] = []
            while let line = try await steady.readLine(), line != "OK" { numbers.append(line) }
            #expect(numbers == ["1", "2", "3", "4", "5"])
            try await steady.write("QUIT\n")
            #expect(try await steady.readLine() == "BYE")
        }
        server.signal(SIGTERM)
        #expect(try await server.exitStatus() == 143)
    }

    @Test func connectionLimitRefusesExtras() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let server = try DemoProcess([
            "serve", "--listen", "127.0.0.1:0", "--postgres", conninfo, "--max-connections", "1",
        ])
        let port = try #require(
            Int(try await server.line(containing: "listening on ").split(separator: ":").last ?? ""))
        try await withResourceScope("clients", registry: ResourceRegistry()) { scope in
            let first = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
            try await first.write("PING\n")
            #expect(try await first.readLine() == "PONG")
            let second = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
            #expect(try await second.readLine() == "ERR busy")
        }
        server.signal(SIGINT)
        #expect(try await server.exitStatus() == 130)
    }

    static func sleepingBackend(observer: PostgresConnection, application: String) async throws -> Int32 {
        let probe = PostgresActivityProbe(observer: observer, pollInterval: .milliseconds(10))
        var pid: Int32?
        _ = try await PostgresActivityProbe.poll(every: probe.pollInterval, within: .seconds(30)) {
            pid = try await probe.backends(.running("pg_sleep", application: application)).first
            return pid != nil
        }
        guard let pid else { throw ConditionNeverHeld(description: "the SLEEP query never ran") }
        return pid
    }
}
