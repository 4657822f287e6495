import Foundation
import ResourceKit
import ResourceKitObservation
import TestSupport
import Testing

@testable import ResourceKitPrometheus

/// ``MetricsEndpoint``'s pure parts: the route of a request line, and `/resources` as JSON that Foundation's parser
/// reads back (the endpoint writes it by hand). Served over real sockets in `MetricsEndpointTests` (the demo).
@Suite struct MetricsEndpointUnitTests {
    @Test func requestLinesRoute() {
        #expect(MetricsRoute(requestLine: "GET /metrics HTTP/1.1") == .metrics)
        #expect(MetricsRoute(requestLine: "HEAD /metrics?x=1 HTTP/1.0") == .metrics)
        #expect(MetricsRoute(requestLine: "GET /resources HTTP/1.1") == .resources)
        #expect(MetricsRoute(requestLine: "POST /metrics HTTP/1.1") == .methodNotAllowed)
        #expect(MetricsRoute(requestLine: "GET /other HTTP/1.1") == .notFound)
        for bad in [
            "", "GET", "GET /metrics", "get /metrics HTTP/1.1", "GET metrics HTTP/1.1", "GET /metrics HTTP/2",
            "GET  /metrics HTTP/1.1",
        ] {
            #expect(MetricsRoute(requestLine: bad) == .badRequest, "\(bad)")
        }
        let notAllowed = MetricsEndpoint.response(for: .methodNotAllowed, registry: ResourceRegistry())
        #expect(notAllowed.hasPrefix("HTTP/1.1 405 ") && notAllowed.contains("Allow: GET, HEAD\r\n"))
        let head = MetricsEndpoint.response(for: .metrics, registry: ResourceRegistry(), head: true)
        #expect(head.hasSuffix("\r\n\r\n"), "HEAD: headers only")
    }

    @Test func liveResourcesAreJSONThatParses() async throws {
        let registry = ResourceRegistry()
        try await withResourceScope("a \"quoted\"\nscope", deadline: .now + .seconds(60), registry: registry) { scope in
            let pipe = try PipeResource()
            let handle = try await scope.register(pipe, kind: PipeResource.kind, label: "tab\there \\ \u{1}")
            handle.cancel()
            let text = LiveResourcesJSON.render(registry.snapshot())
            let parsed = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]]
            let item = try #require(parsed?.first)
            #expect(item["label"] as? String == "tab\there \\ \u{1}")
            #expect(item["scope"] as? String == "a \"quoted\"\nscope")
            #expect(item["kind"] as? String == PipeResource.kind.name)
            #expect(item["cancellation"] as? String == "cancelled")
            let deadline = try #require(item["deadline_in_seconds"] as? Double)
            #expect(deadline > 50 && deadline <= 60)
        }
        #expect(LiveResourcesJSON.render(registry.snapshot()) == "[]\n")
    }
}
