// Inlinable, so that the generic shell is specialised where it is called (a query's `[PostgresResult]`): an
// unspecialised one allocates its result's buffers from the task allocator on every operation (Docs/Decisions/
// 0006). Everything it calls is concrete and lives in this module (`enter`, `CancellationLinks`).
/// Runs one operation of a resource (a query, a request and its reply, a command) so that cancelling it stops
/// the work it started outside the process, at whichever level the cancel comes from.
///
/// There are three levels of cancellation, and this function joins them (Docs/Architecture.md, "Three levels of
/// cancellation"):
/// - **Resource level**: the resource itself is cancelled (its scope's task, ``ResourceScope/cancel()``, the
///   scope's deadline, ``ResourceHandle/cancel(_:)``). ResourceKit marks every wait bound to the handle
///   cancelled, runs the `onCancel` of every operation running on it, calls the adapter's
///   ``ManagedResource/cancel()``, cancels the handle's ``ResourceHandle/parts`` and resumes the waits. The
///   resource is finished.
/// - **Operation level**: only the task that runs this operation is cancelled, or `deadline` passes, while the
///   resource lives on (a shared connection, a pooled one).
/// - **Borrowing scope**: the calling task's innermost ``ResourceScope`` does not own the resource (a pooled
///   connection, one an outer scope owns): the operation joins that scope, and the scope's cancellation
///   (``ResourceScope/cancel()``, a parent's cancel, its deadline) stops the operation at the operation level,
///   with the scope's reason. The scope's deadline also counts in ``ResourceHandle/operationDeadline``. The
///   operation's waits resume with the reason's error and `onCancel` runs; ``ManagedResource/cancel()`` is
///   *not* called. `onCancel` is where the adapter stops the external work (a Postgres cancel request, an
///   "unblock client" command) and notes what the resource must clean up before its next operation (a late
///   reply to drain).
///
/// Cancellation: a checkpoint first: if the task, the handle or `deadline` is already cancelled or past, it
/// throws before `body` runs (nothing is sent). While `body` runs, a cancel marks every ``CancellationCell`` the
/// body runs unshielded cancelled (so that what `onCancel` wakes cannot complete one instead), calls `onCancel`
/// once with the reason, on the canceller's thread, then resumes at once those cells
/// (`IOReactor` waits, `BlockingPool` jobs, nested operations), whichever handle they are bound to: when a
/// cancelled wait of the body throws, `onCancel` has run (Docs/Architecture.md, "The cancel tree"; a wait in a
/// child task of the body is the exception: it may resume first). `onCancel` must be short and non-blocking (a
/// non-blocking send such as `SocketConnection.trySend`, a job handed to `BlockingPool`): the waits resume only
/// after it returns. It must not take a lock that is held while a continuation is resumed. If the body then
/// fails, the reason's error is thrown (`CancellationError` or ``DeadlineExceededError``), whatever the body
/// threw; if the body completed anyway, its result stands. A body that throws in a cancelled task whose cancel has
/// not reached the operation yet (the body saw the task's mark before the task's handler ran) gets `onCancel` on its
/// way out, on its own thread, so that the work it started is stopped all the same. A cancel after the body ended
/// does nothing.
///
/// - Parameters:
///   - handle: the resource's registration; `nil` runs the operation bound to its task and `deadline` only.
///   - deadline: a deadline for this operation alone (a scope's deadline reaches it through `handle`, or as
///     the borrowing scope's).
///   - onCancel: stops the operation's external work; receives why.
///   - body: the operation.
///
/// Counting: an operation bound to a handle is one sample of its kind's `resourcekit_operations_total{kind,outcome}`
/// (``OperationOutcome``: completed, cancelled, deadline exceeded, failed), when it ends.
@inlinable
public func withResourceOperation<Result>(
    boundTo handle: ResourceHandle?,
    deadline: ContinuousClock.Instant? = nil,
    onCancel: @escaping @Sendable (CancellationReason) -> Void,
    _ body: () async throws -> Result
) async throws -> Result {
    try await withResourceOperation(boundTo: handle, deadline: deadline, counted: true, onCancel: onCancel, body)
}

/// ``withResourceOperation(boundTo:deadline:onCancel:_:)``, and `counted: false` for an adapter that runs one
/// caller's operation as several of these (a row stream's batches) and counts it once itself
/// (``ResourceHandle/recordOperation(_:)``).
@inlinable
package func withResourceOperation<Result>(
    boundTo handle: ResourceHandle?,
    deadline: ContinuousClock.Instant? = nil,
    counted: Bool,
    onCancel: @escaping @Sendable (CancellationReason) -> Void,
    _ body: () async throws -> Result
) async throws -> Result {
    let (operation, links) = try ResourceOperation.enter(boundTo: handle, deadline: deadline, onCancel: onCancel)
    defer { links.leave(operation, handle: handle) }
    do {
        let value = try await ResourceOperation.currentLocal.withValue(operation) {
            // One task-cancellation handler per task entry into the tree (Docs/Architecture.md, "The cancel tree"):
            // an operation under a node of its own task is reached by that node's handler.
            if links.isTaskEntry {
                return try await withTaskCancellationHandler {
                    try operation.start()
                    return try await body()
                } onCancel: {
                    operation.taskCancelled()
                }
            }
            try operation.start()
            return try await body()
        }
        _ = operation.finish()
        if counted { handle?.recordOperation(.completed) }
        return value
    } catch {
        let thrown = operation.finishThrowing()?.error ?? error
        if counted { handle?.recordOperation(OperationOutcome(error: thrown)) }
        throw thrown
    }
}

extension ResourceOperation {
    /// The checkpoint (the task, the handle, `deadline`), then a new operation: a child of the task's innermost node,
    /// in its resource's set, with its deadline's timer.
    @usableFromInline
    static func enter(
        boundTo handle: ResourceHandle?,
        deadline: ContinuousClock.Instant?,
        onCancel: @escaping @Sendable (CancellationReason) -> Void
    ) throws -> (ResourceOperation, CancellationLinks) {
        try handle?.checkCancellation()
        try Task.checkCancellation()
        if let deadline, deadline <= .now { throw DeadlineExceededError(deadline: deadline) }

        let scope = ResourceScope.current
        let parent = CancelTree.innermost(in: scope)
        let operation = ResourceOperation(
            onCancel: onCancel,
            deadline: Deadlines.earliest(
                deadline.stored, ResourceOperation.current?.storedDeadline, scope?.storedDeadline),
            scope: scope, handle: handle, task: TaskIdentity.current, parentNode: parent)
        let links = CancellationLinks.link(operation: operation, handle: handle, parent: parent, deadline: deadline)
        return (operation, links)
    }
}
