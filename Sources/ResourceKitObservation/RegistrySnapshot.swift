public import ResourceKit

/// A point-in-time copy of the registry: live resources, per-kind counters and latency
/// (`registry.snapshot()`).
public struct RegistrySnapshot: Sendable {
    /// One live resource.
    public struct LiveResource: Sendable, Hashable {
        public let info: ResourceInfo
        /// Set once the resource was cancelled.
        public let cancellation: CancellationReason?
        /// Time since registration, when the snapshot was taken.
        public let age: Duration
    }

    /// Counters for one kind.
    public struct KindCounters: Sendable, Hashable {
        public var acquired: UInt64 = 0
        public var cancelled: UInt64 = 0
        public var closed: UInt64 = 0
        /// Closes that threw.
        public var failed: UInt64 = 0
        /// Closes that overran the timeout.
        public var closeTimedOut: UInt64 = 0
        /// Leaks of any reason.
        public var leaked: UInt64 = 0
        /// Leaks by reason (they add up to ``leaked``).
        public var leakedByReason: [LeakReason: UInt64] = [:]
        /// Adapter-reported events by name (`ResourceHandle.report(_:)`), e.g. which path each Postgres cancel
        /// took. Operation-level cancellations (a query's task cancelled on a connection that lives on) show
        /// here, not in ``cancelled``.
        public var adapterEvents: [String: UInt64] = [:]
        /// Cancel requested to the cancelled wait resumed, for every wait bound to a resource of the kind: a
        /// resource's cancel and an operation's (a pooled query's task cancelled, its deadline, its borrowing
        /// scope) alike.
        public var cancellationLatency = LatencyHistogram()
        /// Operations ended, by outcome (`resourcekit_operations_total`): each operation run in
        /// `withResourceOperation(boundTo:)` with a handle, and each one an adapter counted
        /// (`ResourceHandle.recordOperation(_:)`), on borrowed connections too.
        public var operations: [OperationOutcome: UInt64] = [:]
        public init() {}

        init(_ tally: KindTally, latency: LatencyBuckets, operations: [OperationOutcome: UInt64]) {
            acquired = tally.acquired
            cancelled = tally.cancelled
            closed = tally.closed
            failed = tally.failed
            closeTimedOut = tally.closeTimedOut
            leaked = tally.leaked
            leakedByReason = tally.leakedByReason
            adapterEvents = tally.adapterEvents
            cancellationLatency = LatencyHistogram(latency)
            self.operations = operations
        }
    }

    /// Live resources, oldest first.
    public let live: [LiveResource]
    /// Counters by kind name.
    public let counters: [String: KindCounters]
    /// Kinds in the plugin table.
    public let kinds: [ResourceKind]
    /// Closes running on tasks the registry owns: resources whose handle was dropped without `close()`,
    /// closed best-effort in the background (each also reported as a leak).
    public var backgroundCloses = 0

    init(_ reading: RegistryReading) {
        live = reading.live.map {
            LiveResource(info: $0.info, cancellation: $0.cancellation, age: reading.takenAt - $0.info.acquiredAt)
        }
        counters = Dictionary(
            uniqueKeysWithValues: reading.tallies.map { name, tally in
                (
                    name,
                    KindCounters(
                        tally, latency: reading.latencies[name] ?? LatencyBuckets(),
                        operations: reading.operations[name] ?? [:])
                )
            })
        kinds = reading.kinds
        backgroundCloses = reading.backgroundCloses
    }

    /// Counters of all kinds added up (latency histograms are not merged).
    public var totals: KindCounters {
        var total = KindCounters()
        for c in counters.values {
            total.acquired += c.acquired
            total.cancelled += c.cancelled
            total.closed += c.closed
            total.failed += c.failed
            total.closeTimedOut += c.closeTimedOut
            total.leaked += c.leaked
            total.operations.merge(c.operations, uniquingKeysWith: +)
        }
        return total
    }
}
