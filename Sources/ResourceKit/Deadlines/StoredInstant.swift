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

    /// The current instant.
    package static var now: StoredInstant { StoredInstant(.now) }

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
