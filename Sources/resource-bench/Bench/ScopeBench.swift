import ResourceKit
import ResourceKitObservation

/// Figure 5: the cost of a scope with one registered no-op resource, beside a bare
/// `withTaskCancellationHandler` around a no-op.
enum ScopeBench {
    final class NoOpResource: SynchronouslyClosedResource {
        func cancel() {}
        func closeSynchronously() {}
    }

    static let kind = ResourceKind(name: "bench.noop")

    /// Counts events, as a metrics bridge would (one atomic add per event).
    struct CountingSink: ResourceEventSink {
        let count = Locked(0)
        func receive(_ event: ResourceEvent) { count.withLock { $0 += 1 } }
    }

    static func run(operations: Int, batches: Int) async throws -> (
        scope: Samples, scopeWithSink: Samples, bare: Samples
    ) {
        let registry = ResourceRegistry()
        let sinkRegistry = ResourceRegistry(sink: CountingSink())
        var scope = Samples("scope + register + close a no-op resource", unit: "ns")
        var scopeWithSink = Samples("scope + register + close, counting event sink", unit: "ns")
        var bare = Samples("bare withTaskCancellationHandler around a no-op", unit: "ns")
        let counter = Locked(0)
        for _ in 0..<batches {
            var start = ContinuousClock.now
            for _ in 0..<operations {
                try await withResourceScope("bench", registry: registry) { scope in
                    try await scope.register(NoOpResource(), kind: kind, label: "noop")
                }
            }
            scope.values.append(Samples.convert(.now - start, to: "ns") / Double(operations))
            start = .now
            for _ in 0..<operations {
                try await withResourceScope("bench", registry: sinkRegistry) { scope in
                    try await scope.register(NoOpResource(), kind: kind, label: "noop")
                }
            }
            scopeWithSink.values.append(Samples.convert(.now - start, to: "ns") / Double(operations))
            start = .now
            for _ in 0..<operations {
                await withTaskCancellationHandler {
                    counter.withLock { $0 += 1 }
                } onCancel: {
                    counter.withLock { $0 -= 1 }
                }
            }
            bare.values.append(Samples.convert(.now - start, to: "ns") / Double(operations))
        }
        return (scope, scopeWithSink, bare)
    }
}
