#if canImport(Glibc)
import Glibc
#endif

/// A `ContinuousClock` instant kept as the `Duration` since a fixed origin, for state that is copied often.
///
/// `ContinuousClock.Instant`'s layout is not known outside the standard library (the type is not frozen), so a
/// struct or an enum that holds one is copied, compared and destroyed through run-time calls (its metadata, its
/// value witnesses) in every module but the standard library. `Duration` is frozen: a value holding a
/// `StoredInstant` has a fixed layout and is copied as plain words. Convert at the edges (public API takes and
/// returns `ContinuousClock.Instant`). Docs/Architecture.md, "Modules", says where the cost showed.
package struct StoredInstant: Sendable, Hashable, Comparable {
    /// The instant's distance from ``origin``.
    package let sinceOrigin: Duration

    /// The reference instant every `StoredInstant` of the process is measured from.
    private static let origin = ContinuousClock.now

    package init(_ instant: ContinuousClock.Instant) {
        sinceOrigin = instant - Self.origin
    }

    /// The current instant: on Linux a raw `CLOCK_BOOTTIME` read (the clock `ContinuousClock` reads there), without
    /// `ContinuousClock.now`'s conversions (about half its cost; Docs/Decisions/0006), once per registered resource.
    /// Exactly the instant `ContinuousClock.now` would give (see ``originBootTime``).
    package static var now: StoredInstant {
        #if os(Linux)
        if let originBootTime = Self.originBootTime {
            return StoredInstant(sinceOrigin: .nanoseconds(bootTime() &- originBootTime))
        }
        #endif
        return StoredInstant(.now)
    }

    /// The clock ``now`` reads, as a count of nanoseconds since an unspecified start (only differences mean
    /// anything), for short intervals timed on a hot path: a cancellation's latency from the cancel request to the
    /// wait's return, a close's duration. A clock read and an integer subtraction; turning a `Duration` into
    /// nanoseconds (or into a histogram bucket) divides a 128-bit integer, too slow for the read-cancel path
    /// (Docs/Decisions/0006).
    package static var nanosecondsNow: UInt64 {
        #if os(Linux)
        UInt64(bitPattern: bootTime())
        #else
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
        #endif
    }

    private init(sinceOrigin: Duration) {
        self.sinceOrigin = sinceOrigin
    }

    /// Whether ``now`` reads the clock directly (for tests: on Linux it must).
    static var readsTheClockDirectly: Bool {
        #if os(Linux)
        originBootTime != nil
        #else
        false
        #endif
    }

    #if os(Linux)
    /// `CLOCK_BOOTTIME`, in nanoseconds.
    private static func bootTime() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_BOOTTIME, &time)
        return Int64(time.tv_sec) &* 1_000_000_000 &+ Int64(time.tv_nsec)
    }

    /// ``origin``'s raw `CLOCK_BOOTTIME` reading in nanoseconds, or `nil` if an instant cannot be read that way.
    ///
    /// `ContinuousClock.Instant` is a `Duration` since the clock's zero, stored as such (a fact of the standard
    /// library's layout, not of its API). That is checked here once, not assumed: an instant read between two raw
    /// reads must, taken as a `Duration`, fall between them, to the nanosecond. If it does not (another layout,
    /// another clock), ``now`` takes `ContinuousClock.now`'s own path.
    private static let originBootTime: Int64? = {
        guard MemoryLayout<ContinuousClock.Instant>.size == MemoryLayout<Duration>.size else { return nil }
        for _ in 0..<4 {
            let before = bootTime()
            let instant = ContinuousClock.now
            let after = bootTime()
            let (seconds, attoseconds) = unsafeBitCast(instant, to: Duration.self).components
            let read = seconds &* 1_000_000_000 &+ attoseconds / 1_000_000_000
            guard attoseconds % 1_000_000_000 == 0, before <= read, read <= after else { continue }
            let (sinceSeconds, sinceAttoseconds) = (instant - origin).components
            return read - (sinceSeconds * 1_000_000_000 + sinceAttoseconds / 1_000_000_000)
        }
        return nil
    }()
    #endif

    /// The instant as the clock's own type.
    package var instant: ContinuousClock.Instant { Self.origin + sinceOrigin }

    package static func < (lhs: StoredInstant, rhs: StoredInstant) -> Bool {
        lhs.sinceOrigin < rhs.sinceOrigin
    }

    /// The time from `other` to this instant.
    package static func - (lhs: StoredInstant, rhs: StoredInstant) -> Duration {
        lhs.sinceOrigin - rhs.sinceOrigin
    }
}

extension Optional where Wrapped == ContinuousClock.Instant {
    /// The instant in its stored form, if any.
    package var stored: StoredInstant? { map(StoredInstant.init) }
}

extension Optional where Wrapped == StoredInstant {
    /// The instant as the clock's own type, if any.
    package var instant: ContinuousClock.Instant? { map(\.instant) }
}
