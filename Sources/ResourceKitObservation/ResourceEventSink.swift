public import ResourceKit

/// Receives every lifecycle event of a registry, as it happens: the bridge to a logging or metrics backend
/// (swift-log, swift-metrics, StatsD, ...). Set it with `registry.eventSink` or `ResourceRegistry(sink:)`.
///
/// `receive(_:)` runs synchronously on the thread that caused the event (a task being cancelled, a scope
/// closing, a canceller's thread inside `onCancel`) with no registry lock held. Keep it short and
/// non-blocking: count, or hand the event to a buffer; never wait for I/O in it. Events carry kind names,
/// labels and scope paths that adapters keep free of user data.
///
/// The default is no sink: an event then costs one uncontended lock acquisition (the bench's "scope + register +
/// close" rows with and without a counting sink, `Benchmarks/Results/`).
public protocol ResourceEventSink: Sendable {
    /// One lifecycle event.
    func receive(_ event: ResourceEvent)
}

/// A sink made of a closure.
public struct ClosureEventSink: ResourceEventSink {
    private let body: @Sendable (ResourceEvent) -> Void

    /// Calls `body` for each event (under the rules of ``ResourceEventSink``).
    public init(_ body: @escaping @Sendable (ResourceEvent) -> Void) {
        self.body = body
    }

    public func receive(_ event: ResourceEvent) {
        body(event)
    }
}
