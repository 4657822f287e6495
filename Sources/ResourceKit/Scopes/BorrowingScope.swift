/// The third level of cancellation (Docs/Architecture.md, "Three levels of cancellation"): a wait or an operation
/// on a resource its task's innermost scope does not own joins that scope, so that the scope's cancellation and
/// deadline reach it without a line of adapter code.
enum BorrowingScope {
    /// Tracks `operation` on `handle` (if any) and joins it to `scope` unless the scope's cancellation reaches it
    /// already: the scope owns the resource (or encloses its owner), or `enclosing` began in the same scope.
    /// Returns the scope it joined, for ``ResourceScope/leave(_:)`` when the operation ends. Cancels `operation`
    /// at once when the handle or the scope was cancelled already.
    static func join(
        _ operation: any CancellableOperation,
        tracked handle: ResourceHandle?,
        enclosing: ResourceOperation?,
        scope: ResourceScope?
    ) -> ResourceScope? {
        let owned = handle?.track(operation, within: scope) ?? false
        guard let scope, !owned, enclosing?.scope !== scope else { return nil }
        scope.join(operation)
        return scope
    }
}

/// Runs `body` as work that belongs to no scope and no operation of the calling task: background work a resource
/// owns (a reader loop, a cleanup after a cancelled query, a close). Unstructured tasks inherit task-locals, so
/// a `Task { }` started while a request runs would otherwise borrow the request's scope, and the request's
/// deadline would cancel the resource's own work.
///
/// ```swift
/// Task { await withoutResourceScope { await connection.drainLateReply() } }
/// ```
///
/// Cancellation: the calling task's cancellation still reaches `body`; only the scope and the enclosing
/// ``withResourceOperation(boundTo:deadline:onCancel:_:)`` no longer do.
public func withoutResourceScope<Result>(_ body: () async throws -> Result) async rethrows
    -> Result
{
    try await ResourceScope.$current.withValue(nil) {
        try await ResourceOperation.currentLocal.withValue(nil) {
            try await body()
        }
    }
}
