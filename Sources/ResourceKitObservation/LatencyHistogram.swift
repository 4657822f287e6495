package import ResourceKit

/// A fixed-size log-scale histogram of durations (nanosecond resolution, about 9% bucket width, up to ~18
/// minutes), cheap enough to update on every cancellation. A pure value: the registry records each kind's
/// latencies without a lock, and a snapshot hands out their value.
public struct LatencyHistogram: Sendable, Hashable {
    package private(set) var buckets: LatencyBuckets

    /// An empty histogram.
    public init() {
        buckets = LatencyBuckets()
    }

    package init(_ buckets: LatencyBuckets) {
        self.buckets = buckets
    }

    /// Number of samples.
    public var count: UInt64 { buckets.count }
    /// The smallest sample.
    public var min: Duration? { buckets.min }
    /// The largest sample.
    public var max: Duration? { buckets.max }
    /// The sum of all samples (for a Prometheus histogram's `_sum`).
    public var sum: Duration { buckets.sum }

    /// Adds one sample.
    package mutating func record(_ duration: Duration) {
        buckets.record(duration)
    }

    /// The value at quantile `q` (0...1), as the upper bound of the bucket that holds it (never above the
    /// maximum sample); `nil` when empty.
    public func quantile(_ q: Double) -> Duration? {
        guard count > 0, let max else { return nil }
        let rank = UInt64((Double(count) * Swift.min(Swift.max(q, 0), 1)).rounded(.up))
        var seen: UInt64 = 0
        for (index, n) in buckets.counts.enumerated() where n > 0 {
            seen += n
            if seen >= Swift.max(rank, 1) {
                let bound = Duration.nanoseconds(Int64(clamping: LatencyBuckets.upperBound(ofBucket: index)))
                return Swift.min(bound, max)
            }
        }
        return max
    }

    /// The number of samples known to be at most `bound`: the samples of every bucket whose upper bound is at
    /// most `bound` (a Prometheus `le` bucket; a bucket that straddles `bound` counts in the next one).
    /// Non-decreasing in `bound`, and equal to ``count`` once `bound` is at least the largest sample's bucket.
    public func count(atMost bound: Duration) -> UInt64 {
        let limit = LatencyBuckets.nanoseconds(bound)
        var total: UInt64 = 0
        for (index, n) in buckets.counts.enumerated() where n > 0 {
            guard LatencyBuckets.upperBound(ofBucket: index) <= limit else { break }
            total += n
        }
        return total
    }

    /// The median.
    public var p50: Duration? { quantile(0.5) }
    /// The 99th percentile.
    public var p99: Duration? { quantile(0.99) }
}
