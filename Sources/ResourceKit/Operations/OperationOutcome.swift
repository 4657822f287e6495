/// How one operation of a resource ended, as `resourcekit_operations_total{kind,outcome}` counts it: a query, a
/// request and its reply, a command (Docs/Architecture.md, "What the registry counts").
///
/// ``withResourceOperation(boundTo:deadline:onCancel:_:)`` counts each operation bound to a handle by itself; an
/// adapter whose operations run without it counts them with ``ResourceHandle/recordOperation(_:)``.
public enum OperationOutcome: Int, Sendable, Hashable, CaseIterable {
    /// The operation returned its result.
    case completed
    /// A cancel stopped it: its task, its scope, its resource, or a borrowing scope (`CancellationError`).
    case cancelled
    /// A deadline stopped it, ours or one the server enforced for us (``DeadlineExceededError``).
    case deadlineExceeded
    /// It threw anything else.
    case failed

    /// The outcome of an operation that threw `error`: ``DeadlineExceededError`` is ``deadlineExceeded``,
    /// `CancellationError` is ``cancelled``, anything else ``failed``.
    public init(error: any Error) {
        switch error {
        case is DeadlineExceededError: self = .deadlineExceeded
        case is CancellationError: self = .cancelled
        default: self = .failed
        }
    }

    /// The label value in the Prometheus exposition (`completed`, `cancelled`, `deadline_exceeded`, `failed`).
    public var metricLabel: String {
        switch self {
        case .completed: "completed"
        case .cancelled: "cancelled"
        case .deadlineExceeded: "deadline_exceeded"
        case .failed: "failed"
        }
    }
}
