/// What the registry counts for one kind, under its lock (the kind's cancellation latencies are recorded without
/// it: ``KindRecorder``). The public view of both is `RegistrySnapshot.KindCounters` in
/// `ResourceKitObservation`: the core counts, the observation module reads (Docs/Architecture.md, "Modules").
package struct KindTally: Sendable {
    package var acquired: UInt64 = 0
    package var cancelled: UInt64 = 0
    package var closed: UInt64 = 0
    package var failed: UInt64 = 0
    package var closeTimedOut: UInt64 = 0
    package var leaked: UInt64 = 0
    package var leakedByReason: [LeakReason: UInt64] = [:]
    package var adapterEvents: [String: UInt64] = [:]

    package init() {}
}

/// The storage of a fixed-size log-scale histogram of durations: nanosecond resolution, 8 buckets per power of two
/// (about 9% bucket width), up to ~18 minutes. Recording is the core's (once per cancellation, into a
/// ``KindRecorder``, which reads out as this value); quantiles and Prometheus buckets are read by
/// `LatencyHistogram` in `ResourceKitObservation`.
package struct LatencyBuckets: Sendable, Hashable {
    /// Buckets per power of two.
    package static let subBuckets = 8
    package static let bucketCount = 40 * subBuckets

    package private(set) var counts: [UInt64]
    package private(set) var count: UInt64 = 0
    package private(set) var min: Duration?
    package private(set) var max: Duration?
    package private(set) var sum: Duration = .zero

    package init() {
        counts = Array(repeating: 0, count: Self.bucketCount)
    }

    /// The value of samples recorded elsewhere (``KindRecorder``): `count` is the buckets' total; the extremes
    /// are `nil` when there is no sample.
    package init(counts: [UInt64], sumNanoseconds: UInt64, minimumNanoseconds: UInt64, maximumNanoseconds: UInt64) {
        precondition(counts.count == Self.bucketCount, "one count per bucket")
        self.counts = counts
        count = counts.reduce(0, &+)
        sum = .nanoseconds(Int64(clamping: sumNanoseconds))
        if count > 0 {
            min = .nanoseconds(Int64(clamping: Swift.min(minimumNanoseconds, maximumNanoseconds)))
            max = .nanoseconds(Int64(clamping: maximumNanoseconds))
        }
    }

    package static func nanoseconds(_ d: Duration) -> UInt64 {
        let (seconds, attoseconds) = d.components
        if seconds < 0 { return 0 }
        let ns = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        if ns.overflow { return UInt64.max }
        return ns.partialValue &+ UInt64(attoseconds / 1_000_000_000)
    }

    package static func bucketIndex(nanoseconds ns: UInt64) -> Int {
        guard ns > 1 else { return 0 }
        let log2 = 63 - ns.leadingZeroBitCount
        // Fraction bits below the leading one, scaled to subBuckets.
        let shift = log2 >= 3 ? log2 - 3 : 0
        let fraction = log2 >= 3 ? Int((ns >> UInt64(shift)) & 0b111) : Int((ns << UInt64(3 - log2)) & 0b111)
        return Swift.min(log2 * subBuckets + fraction, bucketCount - 1)
    }

    /// The upper bound of bucket `index`, in nanoseconds.
    package static func upperBound(ofBucket index: Int) -> UInt64 {
        let log2 = index / subBuckets
        let fraction = UInt64(index % subBuckets)
        let base = UInt64(1) << UInt64(log2)
        return base + (base * (fraction + 1)) / UInt64(subBuckets)
    }

    /// Adds one sample, at nanosecond resolution.
    package mutating func record(_ duration: Duration) {
        record(nanoseconds: Self.nanoseconds(duration))
    }

    /// Adds one sample of `ns` nanoseconds.
    package mutating func record(nanoseconds ns: UInt64) {
        counts[Self.bucketIndex(nanoseconds: ns)] += 1
        count += 1
        let duration = Duration.nanoseconds(Int64(clamping: ns))
        sum += duration
        if min.map({ duration < $0 }) ?? true { min = duration }
        if max.map({ duration > $0 }) ?? true { max = duration }
    }
}

/// The registry's state as the observation module reads it (`registry.snapshot()`), copied under its lock.
package struct RegistryReading: Sendable {
    package struct Live: Sendable {
        package let info: ResourceInfo
        package let cancellation: CancellationReason?
    }

    /// Live resources, in registration order.
    package let live: [Live]
    package let tallies: [String: KindTally]
    /// Each kind's cancellation latencies, by name (read from the recorders after the lock).
    package let latencies: [String: LatencyBuckets]
    /// Each kind's operations by outcome, by name (read from the recorders after the lock).
    package let operations: [String: [OperationOutcome: UInt64]]
    /// Kinds in the plugin table, by name.
    package let kinds: [ResourceKind]
    package let backgroundCloses: Int
    /// When the copy was taken (ages are measured to it).
    package let takenAt: ContinuousClock.Instant
}
