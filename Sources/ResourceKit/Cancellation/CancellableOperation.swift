/// Something in flight that can be told to stop: the type-erased face of a ``CancellationCell`` that
/// ``ResourceHandle`` keeps for every operation running on a resource.
@usableFromInline
protocol CancellableOperation: AnyObject, Sendable {
    /// Stops the operation for `reason`. Synchronous, non-blocking, idempotent, callable from any thread.
    func cancel(_ reason: CancellationReason)
}
