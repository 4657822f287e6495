import Foundation
import ResourceKit
import ResourceKitTesting
import Testing

/// The kit against the seeded variants of the connection, with no probe: each is caught by the check that names it.
/// `SEEDED_RUNS=20` runs each variant 20 times and requires 19 catches; the default, what CI runs, is five runs
/// each, four of which must catch it.
extension RedisExampleTests {
    @Suite struct SeededRedisTests {
        static let runs = ProcessInfo.processInfo.environment["SEEDED_RUNS"].flatMap(Int.init) ?? 5
        static var required: Int { runs >= 20 ? runs - runs / 20 : runs - 1 }

        /// Fewer rounds of the checks that repeat: none of them is what catches these variants but the reuse
        /// check, and a variant whose drain gives up makes each round last two seconds.
        static var bounds: AdapterConformance<SeededRedisConnection>.Bounds {
            var bounds = AdapterConformance<SeededRedisConnection>.Bounds()
            bounds.reuseRounds = 20
            bounds.startRounds = 20
            return bounds
        }

        /// The checks that catch each variant (a check's name starts with `check`) and what their message says.
        static let catches: [SeededRedisConnection.Bug: [(check: String, message: String)]] = [
            .flagOnly: [
                ("reuse after an operation-level cancel", "still holds the resource"),
                ("reuse after an operation-level cancel", "found the connection broken"),
            ],
            .lateStop: [("reuse after an operation-level cancel", "the server went on with the cancelled work")],
            .blockingCallOnCooperativePool: [("the cooperative pool stays free", "holds it")],
            .noDrain: [("reuse after an operation-level cancel", "drain the cancelled operation's reply")],
            .killConnectionLeaked: [("", "close() left")],
        ]

        @Test(arguments: SeededRedisConnection.Bug.allCases)
        func eachSeededBugIsCaughtWithoutAProbe(bug: SeededRedisConnection.Bug) async throws {
            let catches = try #require(Self.catches[bug], "no expected check for \(bug)")
            if let only = ProcessInfo.processInfo.environment["SEEDED_BUG"], only != bug.rawValue { return }
            let port = try await RedisExampleTests.port
            var caught = 0
            var last = ""
            for _ in 0..<Self.runs {
                let report = await AdapterConformance<SeededRedisConnection>(
                    "seeded redis (\(bug))",
                    bounds: Self.bounds,
                    make: { scope in try await SeededRedisConnection.connect(port: port, bug: bug, in: scope) },
                    blockingOperation: { redis in _ = try await redis.command(["BLPOP", "never", "0"]) },
                    ownedDescriptors: { redis in redis.ownedDescriptors },
                    exchange: { redis, token in try await redis.command(["ECHO", token]).string ?? "" }
                ).run()
                let catching = report.failures.contains { failure in
                    catches.contains { expected in
                        failure.name.hasPrefix(expected.check)
                            && (expected.message.isEmpty || failure.failure?.contains(expected.message) == true)
                    }
                }
                if catching { caught += 1 }
                last = "\(report)"
            }
            print("seeded \(bug): caught \(caught) of \(Self.runs) without a probe")
            #expect(
                caught >= Self.required,
                "\(bug): caught \(caught) of \(Self.runs) (\(Self.required) required); last report:\n\(last)")
        }
    }
}
