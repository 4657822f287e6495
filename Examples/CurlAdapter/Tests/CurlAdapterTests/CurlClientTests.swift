import CurlAdapter
import Foundation
import ResourceKit
import ResourceKitTesting
import Testing

/// Every test of the example, one at a time: the kit's timing checks want the cores, and a seeded variant that
/// holds the cooperative pool would stall any test running beside it.
@Suite(.serialized) struct CurlExampleTests {}

/// The example against the conformance kit, with no probe of its own (the kit sees the request's socket), and
/// against the HTTP peer's view of the wire.
extension CurlExampleTests {
    @Suite struct CurlClientTests {
        @Test func passesTheConformanceKitWithoutAProbe() async throws {
            let peer = try HTTPTestPeer()
            // snippet: curl-kit (quoted in Docs/WritingAnAdapter.md)
            let kit = AdapterConformance<CurlClient>(
                "CurlClient",
                make: { scope in try await CurlClient.open("http://127.0.0.1:\(peer.port)", in: scope) },
                blockingOperation: { client in _ = try await client.get("/never") },
                ownedDescriptors: { client in client.openSockets },  // asked again while a request runs
                exchange: { client, token in try await client.get("/echo/\(token)").text }
            )
            let report = await kit.run()
            // end snippet
            await peer.stop()
            print(report)
            #expect(report.passed, "\(report)")
        }

        @Test func answersTricklesAndClosesItsSocketsAsItReturns() async throws {
            let peer = try HTTPTestPeer()
            try await withResourceScope("curl") { scope in
                let client = try await CurlClient.open("http://127.0.0.1:\(peer.port)", in: scope)
                let response = try await client.get("/echo/hello")
                #expect(response.status == 200 && response.text == "hello")
                #expect(client.openSockets.isEmpty)
                // A body a byte at a time: a turn of libcurl's loop per byte.
                #expect(try await client.get("/trickle").body.count == 100)
                #expect(client.openSockets.isEmpty)
            }
            // Each request's connection closed with it: the peer saw both end.
            try await until("the peer saw both connections close", peer.openConnectionCounts()) { $0 == 0 }
            #expect(peer.connections.count == 2)
            await peer.stop()
        }

        /// The promise, seen from the server: a request whose task is cancelled ends on the wire at once.
        @Test func aCancelledRequestEndsOnTheWireAtOnce() async throws {
            let peer = try HTTPTestPeer()
            try await withResourceScope("curl") { scope in
                let client = try await CurlClient.open("http://127.0.0.1:\(peer.port)", in: scope)
                // Owner: this test, which cancels and awaits it.
                let request = Task { try await client.get("/never") }
                try await until("the request reached the peer", peer.openConnectionCounts()) { _ in
                    peer.connections.first?.path == "/never"
                }
                let cancelled = ContinuousClock.now
                request.cancel()
                await #expect(throws: CancellationError.self) { try await request.value }
                let returned = ContinuousClock.now - cancelled
                #expect(client.openSockets.isEmpty)
                try await until("the peer saw the disconnect", peer.openConnectionCounts()) { $0 == 0 }
                let seen = try #require(peer.connections.first?.closed) - cancelled
                print("cancel -> return \(returned), cancel -> the peer saw the disconnect \(seen)")
                #expect(returned < .seconds(1) && seen < .seconds(1))
            }
            await peer.stop()
        }

        /// 200 requests at once, answered, trickled or never answered, half of them cancelled at random moments
        /// and the never-answered ones after that: every socket closed, every connection over, no descriptor left.
        @Test func manyRequestsWithRandomCancelsLeaveNothingBehind() async throws {
            let peer = try HTTPTestPeer()
            var before = 0
            try await withResourceScope("curl") { scope in
                let client = try await CurlClient.open("http://127.0.0.1:\(peer.port)", in: scope)
                // The reactor's descriptors open before the count (run alone, this test would count them as left
                // behind); libdispatch's timers are `anon_inode`s, which `resourceCount` leaves out.
                _ = try await client.get("/answer")
                before = DescriptorLedger.now().resourceCount
                let paths = ["/answer", "/trickle", "/never"]
                let requests = (0..<200).map { index in
                    // Owner: this test, which cancels and awaits each one.
                    Task { try await client.get(paths[index % paths.count]) }
                }
                for (index, request) in requests.enumerated() where index % 2 == 1 || index % 3 == 2 {
                    try await Task.sleep(for: .microseconds(Int.random(in: 0...400)))
                    request.cancel()
                }
                var answered = 0
                for request in requests {
                    if (try? await request.value) != nil { answered += 1 }
                }
                #expect(answered >= 200 / 3 / 2, "\(answered) answered")
                #expect(client.openSockets.isEmpty)
            }
            try await until("the peer saw every connection close", peer.openConnectionCounts()) { $0 == 0 }
            let after = DescriptorLedger.now().resourceCount
            #expect(after == before)
            await peer.stop()
        }
    }
}
