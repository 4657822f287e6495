/// Deadlines are absolute instants on the continuous clock (`ContinuousClock.Instant`) everywhere in
/// ResourceKit's API: `withResourceScope("request", deadline: .now + .seconds(2))`. Absolute deadlines make
/// nesting simple: a scope's effective deadline is the minimum of its own and its parent's. Expiry cancels the
/// scope's resources with ``CancellationReason/deadlineExceeded(_:)``, which surfaces as
/// ``DeadlineExceededError`` (never as a bare `CancellationError`).
enum Deadlines {
    /// The earliest of two or three optional deadlines, in their stored form (``StoredInstant``: no run-time
    /// calls for the clock's resilient type).
    static func earliest(_ a: StoredInstant?, _ b: StoredInstant?, _ c: StoredInstant? = nil) -> StoredInstant? {
        func earlier(_ x: StoredInstant?, _ y: StoredInstant?) -> StoredInstant? {
            guard let x else { return y }
            guard let y else { return x }
            return min(x, y)
        }
        return earlier(earlier(a, b), c)
    }
}
