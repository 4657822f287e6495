/// Why an operation, a resource or a scope was cancelled.
///
/// The reason decides the error an interrupted operation throws: ``cancelled`` surfaces as
/// `CancellationError`, ``deadlineExceeded(_:)`` as ``DeadlineExceededError``. Callers can therefore always
/// tell "someone cancelled us" apart from "we ran out of time" and from a genuine failure.
public enum CancellationReason: Sendable, Hashable {
    /// The owning task, the scope or the resource was cancelled.
    case cancelled
    /// The effective deadline (an absolute instant) passed.
    // Indirect: `ContinuousClock.Instant`'s layout is not known outside the standard library (it is not frozen),
    // so an enum holding it inline is copied, tested and destroyed through run-time calls (metadata, value
    // witnesses) wherever a reason is stored: in every cancellation cell, operation, handle and scope state. Boxed,
    // the reason is one reference, fixed in layout, and the box is made only when a deadline passes.
    indirect case deadlineExceeded(ContinuousClock.Instant)

    /// The error an operation interrupted for this reason throws.
    public var error: any Error {
        switch self {
        case .cancelled:
            return Self.cancellationError
        case .deadlineExceeded(let deadline):
            return DeadlineExceededError(deadline: deadline)
        }
    }

    /// One `CancellationError` boxed once, for every cancelled operation: an `any Error` is a heap box, and each
    /// cancelled wait made one on the canceller's thread, inside the cancel's latency (Benchmarks/History.md). The box
    /// is immutable and shared like any error value.
    private static let cancellationError: any Error = CancellationError()
}

/// Thrown by an operation that was stopped because its scope's (or its own) deadline passed.
///
/// It is deliberately *not* a `CancellationError`: a deadline is an outcome the caller usually wants to report
/// ("the query took too long"), while a cancellation means nobody is waiting for the answer any more.
public struct DeadlineExceededError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The absolute deadline that passed.
    public let deadline: ContinuousClock.Instant

    /// Creates the error for `deadline`.
    public init(deadline: ContinuousClock.Instant) {
        self.deadline = deadline
    }

    public var description: String { "DeadlineExceededError: the operation's deadline passed" }
}

extension Error {
    /// `true` for the errors ResourceKit uses to say "stopped on purpose": `CancellationError` and
    /// ``DeadlineExceededError``. Use it where code must never treat a cancellation as a failure.
    public var isResourceCancellation: Bool {
        self is CancellationError || self is DeadlineExceededError
    }
}
