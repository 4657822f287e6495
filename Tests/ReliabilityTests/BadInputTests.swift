import Foundation
import Glibc
import PostgresAdapter
import PostgresTestSupport
import ResourceKit
import SocketAdapter
import TestSupport
import Testing

/// Bad input of every kind: a clear, typed error, no crash, nothing left in an unknown state.
@Suite struct BadInputTests {
    @Test(arguments: [
        "host=127.0.0.1 port", "= =", "host='unterminated", "postgres://", "postgres://u:secret@[::1",
        "postgresql://h:99999999/db",
        "port=-1 host=127.0.0.1 connect_timeout=2", "host=/nonexistent/socket/dir connect_timeout=2", "\u{0}",
        String(repeating: "x", count: 100_000),
    ])
    func malformedConninfoIsTypedAndHidesSecrets(conninfo: String) async throws {
        let registry = ResourceRegistry()
        try await withResourceScope("bad", registry: registry) { scope in
            await #expect { try await PostgresConnection.connect(conninfo, in: scope) } throws: { error in
                guard let error = error as? PostgresError else { return false }
                return [.invalidConfiguration, .connection].contains(error.code)
                    && !error.description.contains("secret")
            }
        }
        #expect(registry.liveCount == 0)
    }

    @Test func wrongParametersAndUndecodableValuesAreTypedAndTheConnectionStaysUsable() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("params", registry: ResourceRegistry()) { scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            await #expect(throws: PostgresError.self) { try await connection.query("SELECT $1::int, $2::int", [1]) }
            await #expect(throws: PostgresError.self) { try await connection.query("SELECT $1::int", ["not a number"]) }
            await #expect(throws: PostgresError.self) { try await connection.query("SELECT $1::uuid", ["nope"]) }
            let row = try await connection.query("SELECT 'text'")[0]
            #expect(throws: PostgresError.self) { try row.decode(Int.self, at: 0) }
            #expect(throws: PostgresError.self) { try row.decode(Int.self, at: 7) }
            #expect(throws: PostgresError.self) { try row.decode(Int.self, named: "missing") }
            #expect(try await connection.query("SELECT 1")[0].decode(Int.self, at: 0) == 1)

            // Bytes that are not UTF-8 (LATIN1 é arrives as 0xE9): replaced, never a crash.
            _ = try await connection.execute("SET client_encoding TO 'LATIN1'")
            let text = try await connection.query("SELECT 'caf' || chr(233)")[0].decode(String.self, at: 0)
            #expect(text == "caf\u{FFFD}")
            _ = try await connection.execute("RESET client_encoding")
        }
    }

    /// Garbage to `serve`: binary bytes, an over-long line, an unknown flag; the server keeps serving.
    @Test func serveSurvivesGarbageAndTheCLIRejectsUnknownFlags() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let server = try DemoProcess(["serve", "--listen", "127.0.0.1:0", "--postgres", conninfo])
        let port = try #require(
            Int(try await server.line(containing: "listening on ").split(separator: ":").last ?? ""))
        try await withResourceScope("garbage", registry: ResourceRegistry()) { scope in
            for round in 0..<ReliabilityLevel.iterations(short: 20, long: 500) {
                let client = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
                var garbage = (0..<Int.random(in: 1...512)).map { _ in UInt8.random(in: 0...255) }.filter { $0 != 10 }
                garbage.append(10)
                try await client.write(garbage)
                #expect(try await client.readLine()?.hasPrefix("ERR") == true, "round \(round)")
                try await client.write(String(repeating: "A", count: 4097 + round) + "\n")
                #expect(try await client.readLine() == "ERR line too long")
                #expect(try await client.readLine() == nil)
            }
            let steady = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
            try await steady.write("PING\n")
            #expect(try await steady.readLine() == "PONG")
        }
        server.signal(SIGTERM)
        #expect(try await server.exitStatus() == 0, "serve shuts down gracefully")

        let (status, unknown) = try await DemoProcess.run(["serve", "--frobnicate"])
        #expect(status == 2 && unknown.standardError.contains("--frobnicate"))
    }
}
