import Foundation
import ResourceKit
import ResourceKitTesting
import Testing

/// The kit against the seeded variants of the client, with no probe: each is caught by the check that names it.
/// `SEEDED_RUNS=20` runs each variant 20 times and requires 19 catches; the default, what CI runs, is five runs
/// each, four of which must catch it.
extension CurlExampleTests {
    @Suite struct SeededCurlTests {
        static let runs = ProcessInfo.processInfo.environment["SEEDED_RUNS"].flatMap(Int.init) ?? 5
        static var required: Int { runs >= 20 ? runs - runs / 20 : runs - 1 }

        /// Fewer rounds of the checks that repeat: none of them is what catches these variants, and a variant whose
        /// cancelled request runs until libcurl's one-second timeout makes each round last that long.
        static var bounds: AdapterConformance<SeededCurlClient>.Bounds {
            var bounds = AdapterConformance<SeededCurlClient>.Bounds()
            bounds.reuseRounds = 10
            bounds.startRounds = 20
            return bounds
        }

        /// The checks that catch each variant (a check's name starts with `check`) and what their message says.
        static let catches: [SeededCurlClient.Bug: [(check: String, message: String)]] = [
            .flagOnly: [("the operation's own descriptors are released", "the transfer went on after the cancel")],
            .noCancel: [("cancel while blocked", "")],
            .blockingCallOnCooperativePool: [("the cooperative pool stays free", "holds it")],
            .socketLeftOpen: [("the operation's own descriptors are released", "still open, and not shut down")],
            .lateStop: [("the operation's own descriptors are released", "still open, and not shut down")],
        ]

        @Test(arguments: SeededCurlClient.Bug.allCases)
        func eachSeededBugIsCaughtWithoutAProbe(bug: SeededCurlClient.Bug) async throws {
            let catches = try #require(Self.catches[bug], "no expected check for \(bug)")
            if let only = ProcessInfo.processInfo.environment["SEEDED_BUG"], only != bug.rawValue { return }
            let peer = try HTTPTestPeer()
            var caught = 0
            var last = ""
            for _ in 0..<Self.runs {
                let report = await AdapterConformance<SeededCurlClient>(
                    "seeded curl (\(bug))",
                    bounds: Self.bounds,
                    make: { scope in
                        try await SeededCurlClient.open("http://127.0.0.1:\(peer.port)", bug: bug, in: scope)
                    },
                    blockingOperation: { client in _ = try await client.get("/never") },
                    ownedDescriptors: { client in client.openSockets },
                    exchange: { client, token in try await client.get("/echo/\(token)").text }
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
            await peer.stop()
            print("seeded \(bug): caught \(caught) of \(Self.runs) without a probe")
            #expect(
                caught >= Self.required,
                "\(bug): caught \(caught) of \(Self.runs) (\(Self.required) required); last report:\n\(last)")
        }
    }
}
