/// An absolute point in time by which work must be done.
///
/// Deadlines are absolute so that nesting is simple: a scope's effective deadline is the minimum of its own
/// and its parent's. Expiry cancels the scope's resources with ``CancellationReason/deadlineExceeded(_:)``,
/// which surfaces as ``DeadlineExceededError`` (never as a bare `CancellationError`).
public struct Deadline: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The instant on the continuous clock.
    public let instant: ContinuousClock.Instant

    /// A deadline at `instant`.
    public static func at(_ instant: ContinuousClock.Instant) -> Deadline { Deadline(instant: instant) }

    /// A deadline `duration` from now (evaluated when the call is made).
    public static func after(_ duration: Duration) -> Deadline { Deadline(instant: .now + duration) }

    /// Time left; negative once passed.
    public var remaining: Duration { instant - .now }

    /// `true` once the deadline has passed.
    public var hasPassed: Bool { instant <= .now }

    /// The earlier of two optional deadlines.
    public static func earliest(_ a: ContinuousClock.Instant?, _ b: ContinuousClock.Instant?) -> ContinuousClock.Instant? {
        switch (a, b) {
        case (nil, nil): return nil
        case (let a?, nil): return a
        case (nil, let b?): return b
        case (let a?, let b?): return min(a, b)
        }
    }

    public static func < (lhs: Deadline, rhs: Deadline) -> Bool { lhs.instant < rhs.instant }

    public var description: String { "Deadline(in \(remaining))" }
}
