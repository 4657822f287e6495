import Foundation
import RedisAdapter
import ResourceKit
import ResourceKitTesting
import Testing

/// Every test of the example, one at a time, on one server: the kit's timing checks want the cores, and a seeded
/// variant that holds the cooperative pool would stall any test running beside it.
@Suite(.serialized) struct RedisExampleTests {
    /// One server for the whole run, started by the first test that needs it and stopped when the process ends (its
    /// parent-death signal kills it even if the run is interrupted).
    static let server = Task { try await RedisTestServer() }
    static var port: Int {
        get async throws { try await server.value.port }
    }
}

/// The example against the conformance kit, with no probe of its own, and against what the server says.
extension RedisExampleTests {
    @Suite struct RedisConnectionTests {
        @Test func passesTheConformanceKitWithoutAProbe() async throws {
            let port = try await RedisExampleTests.port
            // snippet: redis-kit (quoted in Docs/WritingAnAdapter.md)
            let kit = AdapterConformance<RedisConnection>(
                "RedisConnection",
                make: { scope in try await RedisConnection.connect(port: port, in: scope) },
                blockingOperation: { redis in _ = try await redis.command(["BLPOP", "never", "0"]) },
                ownedDescriptors: { redis in redis.ownedDescriptors },  // its socket and the control connection's
                exchange: { redis, token in try await redis.command(["ECHO", token]).string ?? "" }
            )
            let report = await kit.run()
            // end snippet
            print(report)
            #expect(report.passed, "\(report)")
        }

        @Test func runsCommands() async throws {
            let port = try await RedisExampleTests.port
            try await withResourceScope("redis") { scope in
                let redis = try await RedisConnection.connect(port: port, in: scope)
                #expect(try await redis.command(["SET", "greeting", "hello"]) == .string("OK"))
                #expect(try await redis.command(["GET", "greeting"]) == .string("hello"))
                #expect(try await redis.command(["GET", "missing"]) == .null)
                #expect(try await redis.command(["DEL", "greeting"]) == .integer(1))
                await #expect(throws: RedisError.self) { try await redis.command(["NOSUCHCOMMAND"]) }
                // The error reply was read: the next command gets its own.
                #expect(try await redis.command(["ECHO", "next"]) == .string("next"))
            }
        }

        /// The promise, seen from the server: a cancelled `BLPOP` no longer waits there. If it still did, it would
        /// take the value pushed after the cancel, and the value would be lost.
        @Test func aCancelledBlockingPopStopsOnTheServer() async throws {
            let port = try await RedisExampleTests.port
            try await withResourceScope("redis") { scope in
                let redis = try await RedisConnection.connect(port: port, in: scope)
                let other = try await RedisConnection.connect(port: port, in: scope)
                _ = try await other.command(["DEL", "jobs"])
                for round in 0..<20 {
                    // Owner: this test, which cancels and awaits it.
                    let pop = Task { try await redis.command(["BLPOP", "jobs", "0"]) }
                    if round % 2 == 0 {
                        // Cancelled once the server has it blocked; else at once, so that the stop may overtake it.
                        try await until("the BLPOP blocks on the server") {
                            try await other.command(["CLIENT", "LIST", "ID", String(redis.clientID)]).string?
                                .contains("cmd=blpop") == true
                        }
                    }
                    let cancelled = ContinuousClock.now
                    pop.cancel()
                    await #expect(throws: CancellationError.self) { try await pop.value }
                    #expect(ContinuousClock.now - cancelled < .seconds(1))  // generous: the kit times it
                    // The next command waits for the drain, then gets its own reply.
                    #expect(try await redis.command(["ECHO", "after \(round)"]) == .string("after \(round)"))
                    _ = try await other.command(["LPUSH", "jobs", "job \(round)"])
                    #expect(try await other.command(["LLEN", "jobs"]) == .integer(1), "round \(round)")
                    _ = try await other.command(["DEL", "jobs"])
                }
            }
        }

        /// A script that runs for ever is killed (`SCRIPT KILL`) once its task is cancelled: the server serves the
        /// other connections again, and this connection's next command gets its own reply.
        @Test func aCancelledScriptIsKilled() async throws {
            let port = try await RedisExampleTests.port
            try await withResourceScope("redis") { scope in
                let redis = try await RedisConnection.connect(port: port, in: scope)
                let other = try await RedisConnection.connect(port: port, in: scope)
                // Owner: this test, which cancels and awaits it.
                let script = Task { try await redis.command(["EVAL", "while true do end", "0"]) }
                try await until("the script runs") {
                    do {
                        _ = try await other.command(["PING"])
                        return false
                    } catch let error as RedisError {
                        return error.message.hasPrefix("BUSY")
                    }
                }
                script.cancel()
                await #expect(throws: CancellationError.self) { try await script.value }
                #expect(try await redis.command(["ECHO", "after"]) == .string("after"))
                #expect(try await other.command(["PING"]) == .string("PONG"))
            }
        }

        /// A connection closed while a cancelled command is still being drained closes at once and cleanly.
        @Test func closesWhileACancelledCommandDrains() async throws {
            let port = try await RedisExampleTests.port
            // A command nothing can stop on the server: its reply comes when it ends, two seconds later. A close
            // that waited for the drain would take that long.
            var cancelled = ContinuousClock.now
            try await withResourceScope("redis") { scope in
                let redis = try await RedisConnection.connect(port: port, in: scope)
                let sleep = Task { try await redis.command(["DEBUG", "SLEEP", "2"]) }
                try await until("the command is sent") { redis.isBusy }
                cancelled = .now
                sleep.cancel()
                await #expect(throws: CancellationError.self) { try await sleep.value }
            }
            #expect(ContinuousClock.now - cancelled < .seconds(1))
            // The server is busy until the sleep ends: the next test waits for it here, not in its own timing.
            try await withResourceScope("redis") { scope in
                _ = try await RedisConnection.connect(port: port, in: scope).command(["PING"])
            }
        }
    }
}

/// Polls `condition` every millisecond until it holds, for at most five seconds.
func until(_ what: String, _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(5)
    while try await !condition() {
        guard ContinuousClock.now < deadline else {
            Issue.record("timed out waiting until \(what)")
            return
        }
        try await Task.sleep(for: .milliseconds(1))
    }
}
