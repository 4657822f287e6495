/// The contract an adapter implements for one resource kind (a socket, a query, a file reader, a child
/// process, ...). Everything else (registration, the cancel-before-start race, exactly-once close, LIFO
/// order, events, metrics, leak reports) is done by ResourceKit, so every adapter gets it right for free.
///
/// Adapters bind their blocking operations to the ``ResourceHandle`` they got at registration
/// (`IOReactor.wait(for:_:boundTo:deadline:)`, `BlockingPool.run(boundTo:deadline:onCancel:_:)`,
/// ``CancellationCell/run(boundTo:deadline:shielded:onCancel:afterCancel:start:)``), so that a cancelled scope or task
/// resumes them at once; `cancel()` is for stopping the *external* work: a Postgres cancel request, a socket
/// shutdown, a signal to a child process.
public protocol ManagedResource: AnyObject, Sendable {
    /// Makes whatever the resource is doing stop now.
    ///
    /// Requirements: synchronous, non-blocking (hand blocking work such as a Postgres cancel request to
    /// `BlockingPool`), idempotent, callable from any thread, possibly concurrently with an operation and
    /// possibly before any operation started. It runs inside `withTaskCancellationHandler`'s `onCancel`, under
    /// the runtime's task lock: never take a lock that an operation holds while resuming a continuation.
    ///
    /// Order: the waits bound to the handle are marked cancelled first (a shutdown here cannot complete one
    /// instead), the `onCancel` of the resource's operations runs, then `cancel()`, and only then do the waits
    /// resume (Docs/Architecture.md, "The cancel tree"): when a cancelled operation throws, `cancel()` has run.
    func cancel()

    /// Releases the resource for good. Called exactly once by ResourceKit when the owning scope ends (last
    /// acquired, first closed), or when the owner closes the handle.
    ///
    /// Cancellation: it runs shielded from the caller's cancellation, and it is bounded by the kind's
    /// ``ResourceKind/closeTimeout``; a close that overruns is abandoned (the task keeps running) and reported
    /// as a leak. A thrown error is reported as a `closeFailed` event; the resource counts as closed.
    func close() async throws
}
