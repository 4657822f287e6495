/// A fixed-size log-scale histogram of durations (nanosecond resolution, about 9% bucket width, up to ~18
/// minutes), cheap enough to update on every cancellation. A pure value.
public struct LatencyHistogram: Sendable, Hashable {
    /// Buckets per power of two.
    static let subBuckets = 8
    static let bucketCount = 40 * subBuckets

    private var buckets: [UInt64]
    /// Number of samples.
    public private(set) var count: UInt64 = 0
    /// The smallest sample.
    public private(set) var min: Duration?
    /// The largest sample.
    public private(set) var max: Duration?
    /// The sum of all samples (for a Prometheus histogram's `_sum`).
    public private(set) var sum: Duration = .zero

    /// An empty histogram.
    public init() {
        buckets = Array(repeating: 0, count: Self.bucketCount)
    }

    static func nanoseconds(_ d: Duration) -> UInt64 {
        let (seconds, attoseconds) = d.components
        if seconds < 0 { return 0 }
        let ns = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        if ns.overflow { return UInt64.max }
        return ns.partialValue &+ UInt64(attoseconds / 1_000_000_000)
    }

    static func bucketIndex(nanoseconds ns: UInt64) -> Int {
        guard ns > 1 else { return 0 }
        let log2 = 63 - ns.leadingZeroBitCount
        // Fraction bits below the leading one, scaled to subBuckets.
        let shift = log2 >= 3 ? log2 - 3 : 0
        let fraction = log2 >= 3 ? Int((ns >> UInt64(shift)) & 0b111) : Int((ns << UInt64(3 - log2)) & 0b111)
        return Swift.min(log2 * subBuckets + fraction, bucketCount - 1)
    }

    /// The upper bound of bucket `index`, in nanoseconds.
    static func upperBound(ofBucket index: Int) -> UInt64 {
        let log2 = index / subBuckets
        let fraction = UInt64(index % subBuckets)
        let base = UInt64(1) << UInt64(log2)
        return base + (base * (fraction + 1)) / UInt64(subBuckets)
    }

    /// Adds one sample.
    mutating func record(_ duration: Duration) {
        let ns = Self.nanoseconds(duration)
        buckets[Self.bucketIndex(nanoseconds: ns)] += 1
        count += 1
        sum += duration
        if min.map({ duration < $0 }) ?? true { min = duration }
        if max.map({ duration > $0 }) ?? true { max = duration }
    }

    /// The value at quantile `q` (0...1), as the upper bound of the bucket that holds it (never above the
    /// maximum sample); `nil` when empty.
    public func quantile(_ q: Double) -> Duration? {
        guard count > 0, let max else { return nil }
        let rank = UInt64((Double(count) * Swift.min(Swift.max(q, 0), 1)).rounded(.up))
        var seen: UInt64 = 0
        for (index, n) in buckets.enumerated() where n > 0 {
            seen += n
            if seen >= Swift.max(rank, 1) {
                let bound = Duration.nanoseconds(Int64(clamping: Self.upperBound(ofBucket: index)))
                return Swift.min(bound, max)
            }
        }
        return max
    }

    /// The number of samples known to be at most `bound`: the samples of every bucket whose upper bound is at
    /// most `bound` (a Prometheus `le` bucket; a bucket that straddles `bound` counts in the next one).
    /// Non-decreasing in `bound`, and equal to ``count`` once `bound` is at least the largest sample's bucket.
    public func count(atMost bound: Duration) -> UInt64 {
        let limit = Self.nanoseconds(bound)
        var total: UInt64 = 0
        for (index, n) in buckets.enumerated() where n > 0 {
            guard Self.upperBound(ofBucket: index) <= limit else { break }
            total += n
        }
        return total
    }

    /// The median.
    public var p50: Duration? { quantile(0.5) }
    /// The 99th percentile.
    public var p99: Duration? { quantile(0.99) }
}
