/// Something in flight that can be told to stop: the type-erased face of a ``CancellationCell`` that
/// ``ResourceHandle`` keeps for every operation running on a resource. Package-wide so that an adapter's own
/// waiter that is not a cell (the Postgres pool's queued lease) can join the caller's levels of cancellation
/// (``CancellationLinks/joinCallersLevels(_:)``).
@usableFromInline
package protocol CancellableOperation: AnyObject, Sendable {
    /// Stops the operation for `reason`. Synchronous, non-blocking, idempotent, callable from any thread.
    func cancel(_ reason: CancellationReason)

    /// Stops the operation as one member of a cancel that reaches several at once: runs its stop hook now (an
    /// operation's `onCancel`) and leaves its resume to `pass` (Docs/Architecture.md, "The cancel tree"). An
    /// adapter's own waiter keeps the default: it is cancelled with the pass's resumes.
    func reach(_ reason: CancellationReason, in pass: inout CancelPass)
}
