import Testing

@testable import ResourceKit
@testable import ResourceKitObservation

@Suite struct LatencyHistogramTests {
    @Test func quantilesAreWithinBucketWidth() {
        var h = LatencyHistogram()
        for us in 1...1000 {
            h.record(.microseconds(us))
        }
        let p50 = h.p50!
        let p99 = h.p99!
        #expect(p50 >= .microseconds(500) && p50 <= .microseconds(500) * 1.15)
        #expect(p99 >= .microseconds(990) && p99 <= .microseconds(1000))
        #expect(h.count == 1000)
        #expect(h.min == .microseconds(1))
        #expect(h.max == .microseconds(1000))
        #expect(LatencyHistogram().p50 == nil)
    }

    /// The hot path records whole nanoseconds (a cancellation's latency, no 128-bit division): the same buckets,
    /// count, sum, minimum and maximum as recording the same samples as `Duration`s.
    @Test func nanosecondSamplesMatchDurationSamples() {
        var fromDurations = LatencyBuckets()
        var fromNanoseconds = LatencyBuckets()
        let samples: [UInt64] = [0, 1, 7, 999, 4_500, 123_456, 9_999_999, 2_000_000_000, 3_600_000_000_000]
        for ns in samples {
            fromDurations.record(.nanoseconds(Int64(ns)))
            fromNanoseconds.record(nanoseconds: ns)
        }
        #expect(fromNanoseconds == fromDurations)
        #expect(fromNanoseconds.count == UInt64(samples.count))
        #expect(fromNanoseconds.min == .zero)
        #expect(fromNanoseconds.max == .seconds(3_600))
        #expect(fromNanoseconds.sum == .nanoseconds(Int64(samples.reduce(0, +))))
        // The hot path's clock: monotonic, in nanoseconds.
        let first = StoredInstant.nanosecondsNow
        #expect(StoredInstant.nanosecondsNow >= first)
    }
}
