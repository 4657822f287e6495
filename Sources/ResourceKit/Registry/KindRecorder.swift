import Synchronization

/// What one registry records for one kind without a lock: its cancellation latencies and its operations' outcomes.
/// Every cancelled wait bound to a handle records one sample on its way out, and every operation one outcome (a
/// query per call: the hottest path); ten thousand waits cancelled at once used to queue on the registry's lock
/// for it (Docs/Architecture.md, "State machines and their owners"). Each field is an atomic of
/// its own, so a reading taken while samples arrive may count a sample in its bucket and not yet in the sum: the
/// count is the buckets' total (always consistent with the quantiles), the sum and the extremes may trail it by
/// the samples in flight.
package final class KindRecorder: Sendable {
    /// `LatencyBuckets.bucketCount` buckets (a literal here: a generic argument; `KindRecorderTests` holds
    /// the two equal).
    private let counts: InlineArray<320, Atomic<UInt64>>
    private let sumNanoseconds = Atomic<UInt64>(0)
    /// `UInt64.max` until the first sample.
    private let minimumNanoseconds = Atomic<UInt64>(.max)
    private let maximumNanoseconds = Atomic<UInt64>(0)
    /// Operations ended, by `OperationOutcome.rawValue`.
    private let outcomes: InlineArray<4, Atomic<UInt64>>

    package init() {
        counts = InlineArray { _ in Atomic(0) }
        outcomes = InlineArray { _ in Atomic(0) }
    }

    /// Counts one operation that ended with `outcome`. Lock-free; any thread.
    package func record(_ outcome: OperationOutcome) {
        outcomes[outcome.rawValue].wrappingAdd(1, ordering: .relaxed)
    }

    /// The operations counted so far, by outcome.
    package func outcomeCounts() -> [OperationOutcome: UInt64] {
        var counts: [OperationOutcome: UInt64] = [:]
        for outcome in OperationOutcome.allCases {
            counts[outcome] = outcomes[outcome.rawValue].load(ordering: .relaxed)
        }
        return counts
    }

    /// The number of buckets, for the test that holds it equal to `LatencyBuckets.bucketCount`.
    static var bucketCount: Int { InlineArray<320, Atomic<UInt64>>.count }

    /// Adds one sample of `ns` nanoseconds. Lock-free; any thread.
    package func record(nanoseconds ns: UInt64) {
        counts[LatencyBuckets.bucketIndex(nanoseconds: ns)].wrappingAdd(1, ordering: .relaxed)
        sumNanoseconds.wrappingAdd(ns, ordering: .relaxed)
        var minimum = minimumNanoseconds.load(ordering: .relaxed)
        while ns < minimum {
            let (exchanged, original) = minimumNanoseconds.weakCompareExchange(
                expected: minimum, desired: ns, ordering: .relaxed)
            if exchanged { break }
            minimum = original
        }
        var maximum = maximumNanoseconds.load(ordering: .relaxed)
        while ns > maximum {
            let (exchanged, original) = maximumNanoseconds.weakCompareExchange(
                expected: maximum, desired: ns, ordering: .relaxed)
            if exchanged { break }
            maximum = original
        }
    }

    /// The samples so far, as the histogram's value.
    package func reading() -> LatencyBuckets {
        var buckets = [UInt64](repeating: 0, count: LatencyBuckets.bucketCount)
        for index in buckets.indices {
            buckets[index] = counts[index].load(ordering: .relaxed)
        }
        return LatencyBuckets(
            counts: buckets, sumNanoseconds: sumNanoseconds.load(ordering: .relaxed),
            minimumNanoseconds: minimumNanoseconds.load(ordering: .relaxed),
            maximumNanoseconds: maximumNanoseconds.load(ordering: .relaxed))
    }
}
