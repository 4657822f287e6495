/// Runs `body` with a new ``ResourceScope`` and closes every resource registered in it when `body` ends.
///
/// - Parameters:
///   - label: a short name for logs and snapshots (no user data); nested scopes form a path.
///   - deadline: an absolute deadline; nested scopes take the minimum of theirs and the parent's. On expiry
///     every resource of the scope is cancelled and its operations throw ``DeadlineExceededError``.
///   - registry: where resources are recorded; defaults to the parent scope's, else ``ResourceRegistry/shared``.
///   - isolation: the caller's isolation; `body` runs on it, so it may touch actor state.
///   - body: the work; the result is returned to the caller after the scope's resources were closed.
///
/// Cancellation: when the calling task is cancelled, every live resource of the scope (and of nested scopes)
/// is cancelled at once from inside `withTaskCancellationHandler`; blocked operations throw
/// `CancellationError` immediately. Closing still happens, shielded from the cancellation and bounded per kind.
/// If the task is already cancelled on entry, the scope starts cancelled (registrations fail fast).
@inlinable @discardableResult
public func withResourceScope<Result>(
    _ label: String,
    deadline: ContinuousClock.Instant? = nil,
    registry: ResourceRegistry? = nil,
    isolation: isolated (any Actor)? = #isolation,
    _ body: (ResourceScope) async throws -> sending Result
) async throws -> sending Result {
    let scope = ResourceScope.entered(label: label, deadline: deadline, registry: registry)
    let box = try await ResourceScope.$current.withValue(scope) {
        // One task-cancellation handler per task entry into the tree: a scope under a node of its own task is
        // reached by that node's handler, in the tree's order (Docs/Architecture.md, "The cancel tree").
        guard scope.isTaskEntry else { return try await runScopeBody(scope, body) }
        return try await withTaskCancellationHandler {
            try await runScopeBody(scope, body)
        } onCancel: {
            scope.taskCancelled()
        }
    }
    return box.take()
}

/// Runs a scope's body, then ends the scope (its resources closed, last acquired first), whether the body returned or
/// threw.
@inlinable
func runScopeBody<Result>(
    _ scope: ResourceScope,
    isolation: isolated (any Actor)? = #isolation,
    _ body: (ResourceScope) async throws -> sending Result
) async throws -> SendingBox<Result> {
    let result: Result
    do {
        result = try await body(scope)
    } catch {
        if let rest = scope.finishInlineThrowing() { await scope.finish(rest) }
        throw error
    }
    if let rest = scope.finishInline() { await scope.finish(rest) }
    return SendingBox(result)
}

/// Carries the body's `sending` result through `TaskLocal.withValue`, whose result is not `sending`.
///
/// `@unchecked Sendable`: the value was returned as `sending` by `body`, so it is in a disconnected region
/// that nothing else references; the box is created once, never shared, and emptied exactly once by the
/// function that created it, which then returns the value as `sending`.
@usableFromInline
struct SendingBox<Value>: @unchecked Sendable {
    @usableFromInline let value: Value
    @inlinable init(_ value: consuming Value) { self.value = value }
    @inlinable consuming func take() -> Value { value }
}
