public import ResourceKit

/// How a piece of work ended, with cancellation kept apart from failure.
///
/// `try?` and a bare `catch` both turn "nobody wants this any more" into "it failed" (or into "carry on"):
/// the statement after `try? await Task.sleep(...)` runs even though the task was cancelled. Run the work
/// through ``withOutcome(isolation:_:)`` instead and switch over the result:
///
/// ```swift
/// switch await withOutcome({ try await db.query("SELECT ...") }) {
/// case .completed(let rows): render(rows)
/// case .cancelled: return                      // nobody is waiting: do nothing at all
/// case .deadlineExceeded: respond(.gatewayTimeout)
/// case .failed(let error): respond(.internalError, error)
/// }
/// ```
public enum Outcome<Value> {
    /// The work returned a value.
    case completed(Value)
    /// The work was cancelled (its task, its scope or its resource).
    case cancelled
    /// The work's deadline passed.
    case deadlineExceeded(DeadlineExceededError)
    /// The work failed for a reason of its own.
    case failed(any Error)

    /// `true` for ``cancelled`` and ``deadlineExceeded(_:)``: the work was stopped on purpose.
    public var isStopped: Bool {
        switch self {
        case .cancelled, .deadlineExceeded: return true
        case .completed, .failed: return false
        }
    }

    /// The value, or `nil` when the work did not complete.
    public var value: Value? {
        if case .completed(let value) = self { return value }
        return nil
    }

    /// The value; otherwise throws what the work threw (`CancellationError` for ``cancelled``).
    public func get() throws -> Value {
        switch self {
        case .completed(let value): return value
        case .cancelled: throw CancellationError()
        case .deadlineExceeded(let error): throw error
        case .failed(let error): throw error
        }
    }

    /// The outcome's name as used in logs and the demo's JSON: `completed`, `cancelled`, `deadline`, `failed`.
    public var name: String {
        switch self {
        case .completed: return "completed"
        case .cancelled: return "cancelled"
        case .deadlineExceeded: return "deadline"
        case .failed: return "failed"
        }
    }

    /// Classifies an error thrown by work that ran while `taskWasCancelled` held.
    ///
    /// `CancellationError` is ``cancelled``; `DeadlineExceededError` is ``deadlineExceeded(_:)``; any other
    /// error thrown by a task that was cancelled also counts as ``cancelled``, because adapters that tear a
    /// resource down may surface the teardown as their own error (a closed socket, a reset stream).
    public static func classify(_ error: any Error, taskWasCancelled: Bool) -> Outcome {
        switch error {
        case let deadline as DeadlineExceededError: return .deadlineExceeded(deadline)
        case is CancellationError: return .cancelled
        default: return taskWasCancelled ? .cancelled : .failed(error)
        }
    }
}

extension Outcome: Sendable where Value: Sendable {}

/// Runs `body` and returns how it ended, never throwing: see ``Outcome``.
///
/// Cancellation: `body` sees the caller's cancellation as usual; whatever it throws is classified with
/// ``Outcome/classify(_:taskWasCancelled:)``, so a cancelled task yields ``Outcome/cancelled`` even when an
/// adapter reported the teardown as an error of its own. A value returned after cancellation still counts as
/// ``Outcome/completed(_:)``: the work did finish.
public func withOutcome<Value>(
    isolation: isolated (any Actor)? = #isolation,
    _ body: () async throws -> Value
) async -> Outcome<Value> {
    do {
        return .completed(try await body())
    } catch {
        return .classify(error, taskWasCancelled: Task.isCancelled)
    }
}
