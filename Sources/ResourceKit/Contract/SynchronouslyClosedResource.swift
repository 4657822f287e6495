/// A resource whose close never blocks and never suspends: closing a descriptor, dropping a buffer,
/// returning a slot. ResourceKit closes it inline, on the closing task, with no shield task and no timer,
/// which makes a scope with such resources almost free (`resource-demo bench`, "scope + register + close").
///
/// Adopt it instead of implementing `close()` when your close is a few non-blocking system calls; keep
/// ``ManagedResource/close()`` (shielded and bounded by ``ResourceKind/closeTimeout``) for closes that wait
/// for something: a server's reply, a child process, a flush.
public protocol SynchronouslyClosedResource: ManagedResource {
    /// Releases the resource for good, at once. Called exactly once, as ``ManagedResource/close()`` is.
    ///
    /// Requirements: non-blocking (no waiting on the network, on a lock held across I/O, or on another task).
    /// Cancellation does not apply: the call is synchronous. A thrown error is reported as a `closeFailed`
    /// event; the resource counts as closed.
    func closeSynchronously() throws
}

extension SynchronouslyClosedResource {
    /// Calls ``closeSynchronously()``.
    public func close() async throws {
        try closeSynchronously()
    }
}
