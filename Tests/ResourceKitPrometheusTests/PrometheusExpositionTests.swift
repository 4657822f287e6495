import Foundation
import ResourceKitTesting
import TestSupport
import Testing

@testable import ResourceKit
import ResourceKitObservation
@_spi(Testing) @testable import ResourceKitIO
@testable import ResourceKitPrometheus

/// The registry in the Prometheus text format, checked by Prometheus's own `promtool`.
@Suite struct PrometheusExpositionTests {
    /// A registry that holds every kind of metric: live resources, acquired, cancelled, closed, close failures,
    /// close timeouts, leaks of several reasons, and cancellation latencies.
    static func populatedRegistry() async throws -> (registry: ResourceRegistry, live: ResourceHandle) {
        let registry = ResourceRegistry()
        let log = CloseLog()
        // Closed normally and a close that throws (a generous timeout: under load a close may be slow); one
        // that overruns its (short) timeout, a leak of reason close_timed_out.
        let quick = ResourceKind(name: "test.quick-close", closeTimeout: .seconds(10))
        let hanging = ResourceKind(name: "test.hanging-close", closeTimeout: .milliseconds(50))
        try await withResourceScope("metrics", registry: registry) { scope in
            _ = try await scope.register(RecordingResource("a", log: log), kind: quick, label: "a")
            _ = try await scope.register(
                RecordingResource("b", log: log, behaviour: .throwing), kind: quick, label: "b")
            _ = try await scope.register(
                RecordingResource("c", log: log, behaviour: .hanging), kind: hanging, label: "c")
        }
        // a cancellation with a measured latency: a pipe read cancelled through its handle
        let pipe = try PipeResource()
        let handle = try registry.register(pipe, kind: PipeResource.kind, label: "pipe")
        let read = Task { try await pipe.readByte(boundTo: handle) }
        try await until("the read parks", IOReactor.shared.waitingDescriptorCounts()) { $0 > 0 }
        handle.cancel()
        _ = await read.result
        handle.report("test.cancel.request")
        await handle.close()
        // a leak of reason deinitialized_without_close
        do {
            _ = try registry.register(RecordingResource("d", log: log), kind: quick, label: "dropped")
        }
        // The handle's deinit reports the leak synchronously, when the block above drops it.
        #expect(registry.snapshot().counters["test.quick-close"]?.leakedByReason[.deinitializedWithoutClose] == 1)
        // one live resource, with a label that must not appear in the exposition
        let live = try registry.register(
            RecordingResource("e", log: log), kind: ResourceKind(name: "test.\"odd\"\\kind"), label: "secret-label")
        return (registry, live)
    }

    @Test func promtoolFindsNoProblem() async throws {
        let (registry, live) = try await Self.populatedRegistry()
        let text = registry.prometheusExposition()
        await live.close()
        let file = NSTemporaryDirectory() + "rk-metrics-\(UInt32.random(in: 0...UInt32.max)).prom"
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let output = file + ".out"
        defer { try? FileManager.default.removeItem(atPath: output) }
        let status = try await BackgroundProcess.runToCompletion(
            ["/bin/sh", "-c", "promtool check metrics < \(file)"], logPath: output)
        let said = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        print("promtool check metrics: exit \(status), output: \(said.isEmpty ? "(none)" : said)")
        #expect(status == 0, "promtool: \(said)")
        #expect(said.isEmpty, "promtool: \(said)")
    }

    @Test func everyMetricIsThereAndHoldsNoUserData() async throws {
        let (registry, live) = try await Self.populatedRegistry()
        let text = registry.prometheusExposition()
        await live.close()
        for expected in [
            #"resourcekit_resources_acquired_total{kind="test.quick-close"} 3"#,
            #"resourcekit_resources_closed_total{kind="test.quick-close"} 2"#,
            #"resourcekit_resources_close_failed_total{kind="test.quick-close"} 1"#,
            #"resourcekit_resources_close_timed_out_total{kind="test.hanging-close"} 1"#,
            #"resourcekit_resources_leaked_total{kind="test.hanging-close",reason="close_timed_out"} 1"#,
            #"resourcekit_resources_leaked_total{kind="test.quick-close",reason="deinitialized_without_close"} 1"#,
            #"resourcekit_resources_cancelled_total{kind="test.pipe"} 1"#,
            #"resourcekit_cancellation_latency_seconds_count{kind="test.pipe"} 1"#,
            #"resourcekit_adapter_events_total{event="test.cancel.request",kind="test.pipe"} 1"#,
            #"resourcekit_cancellation_latency_seconds_bucket{kind="test.pipe",le="+Inf"} 1"#,
            #"resourcekit_resources_live{kind="test.\"odd\"\\kind"} 1"#,
        ] {
            #expect(text.contains(expected + "\n"), "missing: \(expected)")
        }
        #expect(!text.contains("secret-label"))
        #expect(!text.contains("metrics"), "a scope path leaked into the labels")
        // Buckets are cumulative: never decreasing, ending at the count.
        let buckets = text.split(separator: "\n")
            .filter { $0.hasPrefix(#"resourcekit_cancellation_latency_seconds_bucket{kind="test.pipe""#) }
            .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }
        #expect(buckets.count == PrometheusExposition.latencyBuckets.count + 1)
        #expect(buckets == buckets.sorted())
        #expect(buckets.last == 1)
    }

    @Test func latencyHistogramCountsUpToABound() {
        var histogram = LatencyHistogram()
        for micros in [1, 10, 100, 1000, 10_000] { histogram.record(.microseconds(micros)) }
        #expect(histogram.count(atMost: .nanoseconds(500)) == 0)
        #expect(histogram.count(atMost: .microseconds(2)) == 1)
        #expect(histogram.count(atMost: .microseconds(150)) == 3)
        #expect(histogram.count(atMost: .seconds(1)) == 5)
        #expect(histogram.sum == .microseconds(11_111))
    }

    @Test func aSinkSeesEveryEventAndNoSinkIsTheDefault() async throws {
        let seen = Locked<[String]>([])
        let registry = ResourceRegistry(
            sink: ClosureEventSink { event in
                seen.withLock { $0.append("\(event.what)") }
            })
        #expect(ResourceRegistry().eventSink == nil)
        // The subject is the events, not the close's time: the kind's close bound is far past any stall of the
        // process. With the default 5 s, a close queued behind the suite's start (every test at once, under the
        // thread sanitizer, beside two busy loops) was reported as timed out and leaked.
        let kind = ResourceKind(name: "test.sink", closeTimeout: TimingBound.singleShot * 6)
        try await withResourceScope("sink", registry: registry) { scope in
            let handle = try await scope.register(RecordingResource("a", log: CloseLog()), kind: kind, label: "a")
            handle.cancel()
        }
        let kinds = seen.withLock { $0 }
        #expect(kinds.count == 3, "\(kinds)")
        #expect(kinds.first == "acquired")
        #expect(kinds.last?.hasPrefix("closed") == true)
        registry.eventSink = nil
        try await withResourceScope("quiet", registry: registry) { scope in
            _ = try await scope.register(RecordingResource("b", log: CloseLog()), kind: kind, label: "b")
        }
        #expect(seen.withLock { $0.count } == 3)
    }
}
