#if canImport(Glibc)
import Glibc
#endif

/// The monotonic clock as a count of nanoseconds, for short intervals timed on a hot path (a cancellation's
/// latency, from the cancel request to the wait's return): a clock read and an integer subtraction. `Duration`
/// arithmetic would do, but turning a `Duration` into nanoseconds (or into a histogram bucket) divides a 128-bit
/// integer, too slow for the read-cancel path (Docs/Decisions/0006).
package enum MonotonicNanoseconds {
    /// Nanoseconds since an unspecified start (`CLOCK_MONOTONIC`); only differences mean anything.
    package static var now: UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    }
}
