import ResourceKit
import ResourceKitObservation

/// Figure 5: the cost of a scope with one registered no-op resource, beside a bare
/// `withTaskCancellationHandler` around a no-op and beside the plain mechanics a scope cannot do without.
///
/// Each batch is timed in the CPU time of the whole process (``processCPUSeconds()``), not the wall clock: the
/// loops run on one thread without suspending, so the two agree on a quiet machine, but with other processes busy
/// beside the bench a wall-clock batch also holds the time the scheduler gave them (Benchmarks/History.md,
/// 2026-12-06). A hop to another thread would still be counted: its CPU is this process's too.
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

    /// The mechanics a scope cannot do without, written plainly: a task-local, a cancellation handler, a scope
    /// and a handle each with a lock, and a table entry keyed by the resource; no ids, phases, counters, clock,
    /// events or leak reports (Docs/Architecture.md, "The cost of a scope").
    final class PlainScope: Sendable {
        @TaskLocal static var current: PlainScope?
        let label: String
        let parent: PlainScope?
        let handles = Locked<[PlainHandle]>([])
        init(label: String, parent: PlainScope?) {
            self.label = label
            self.parent = parent
        }
        func cancel() {
            for handle in handles.withLock({ $0 }) { handle.cancel() }
        }
    }

    final class PlainHandle: Sendable {
        let resource: Locked<(any SynchronouslyClosedResource)?>
        let label: String
        init(_ resource: any SynchronouslyClosedResource, label: String) {
            self.resource = Locked(resource)
            self.label = label
        }
        func cancel() { resource.withLock { $0 }?.cancel() }
        func close() {
            guard let taken = resource.withLock({ $0.take() }) else { return }
            try? taken.closeSynchronously()
        }
    }

    static func plainScope(table: Locked<[ObjectIdentifier: String]>) async {
        let scope = PlainScope(label: "bench", parent: PlainScope.current)
        await PlainScope.$current.withValue(scope) {
            await withTaskCancellationHandler {
                let resource = NoOpResource()
                let handle = PlainHandle(resource, label: "noop")
                table.withLock { $0[ObjectIdentifier(resource)] = "noop" }
                scope.handles.withLock { $0.append(handle) }
                for handle in scope.handles.withLock({ $0 }).reversed() {
                    handle.close()
                }
                _ = table.withLock { $0.removeValue(forKey: ObjectIdentifier(resource)) }
                scope.handles.withLock { $0 = [] }
            } onCancel: {
                scope.cancel()
            }
        }
    }

    /// The four quantities, per operation, one sample per round, and the ratios of each round.
    struct Figures: Sendable {
        var scope = Samples("scope + register + close a no-op resource", unit: "ns")
        var scopeWithSink = Samples("scope + register + close, counting event sink", unit: "ns")
        var bare = Samples("bare withTaskCancellationHandler around a no-op", unit: "ns")
        var plain = Samples(
            "plain mechanics of a scope (task-local, handler, two locked objects, a table)", unit: "ns")
        /// Each round's scope over its bare handler, scope over plain mechanics, and sink over no sink.
        var scopeOverBare: [Double] = []
        var scopeOverPlain: [Double] = []
        var sinkOverScope: [Double] = []
    }

    /// The bare handler is this many times cheaper than a scope, roughly: its batches run this many times more
    /// operations, so that the two sides of a round last about as long.
    static let bareOperationsFactor = 4

    /// Measures `rounds` rounds (``rotatingRounds(_:sides:_:)``). Each round times a batch of each of the four loops
    /// back to back, starting with a different one each round, so that each ratio compares batches timed within a few
    /// milliseconds of each other and no loop always runs first or last. A busy neighbour that slows the machine for a
    /// while slows both sides of the rounds it overlaps; the median over rounds drops the rounds it split.
    static func run(operations: Int, rounds: Int) async throws -> Figures {
        let registry = ResourceRegistry()
        let sinkRegistry = ResourceRegistry(sink: CountingSink())
        let counter = Locked(0)
        let table = Locked<[ObjectIdentifier: String]>([:])
        var figures = Figures()
        let measured = try await rotatingRounds(rounds, sides: 4) { loop in
            let count = loop == 2 ? operations * bareOperationsFactor : operations
            let start = processCPUSeconds()
            switch loop {
            case 0:
                for _ in 0..<count {
                    try await withResourceScope("bench", registry: registry) { scope in
                        try await scope.register(NoOpResource(), kind: kind, label: "noop")
                    }
                }
            case 1:
                for _ in 0..<count {
                    try await withResourceScope("bench", registry: sinkRegistry) { scope in
                        try await scope.register(NoOpResource(), kind: kind, label: "noop")
                    }
                }
            case 2:
                for _ in 0..<count {
                    await withTaskCancellationHandler {
                        counter.withLock { $0 += 1 }
                    } onCancel: {
                        counter.withLock { $0 -= 1 }
                    }
                }
            default:
                for _ in 0..<count {
                    await plainScope(table: table)
                }
            }
            return (processCPUSeconds() - start) * 1e9 / Double(count)
        }
        for perOperation in measured {
            figures.scope.values.append(perOperation[0])
            figures.scopeWithSink.values.append(perOperation[1])
            figures.bare.values.append(perOperation[2])
            figures.plain.values.append(perOperation[3])
            if perOperation[2] > 0 { figures.scopeOverBare.append(perOperation[0] / perOperation[2]) }
            if perOperation[3] > 0 { figures.scopeOverPlain.append(perOperation[0] / perOperation[3]) }
            if perOperation[0] > 0 { figures.sinkOverScope.append(perOperation[1] / perOperation[0]) }
        }
        return figures
    }
}
