/// The operation a body of ``withResourceOperation(boundTo:deadline:onCancel:_:)`` runs in, for a synchronous side
/// effect that is not a wait: "has my operation been cancelled?", asked right before a send.
///
/// A cancel marks the operation cancelled *before* it runs the operation's `onCancel`. So an adapter that asks
/// ``isCancelled`` under the lock its send takes, and takes the same lock in `onCancel`, gets one of two orders and
/// never a third: the send sees the cancel and does not happen, or the send happened and `onCancel` (which waits for
/// the lock) sees that it did and stops it on the server.
///
/// ```swift
/// try await withResourceOperation(boundTo: handle, onCancel: { _ in sends.withLock { $0.stopIfSent(id) } }) {
///     let operation = ResourceOperationToken.current
///     try sends.withLock { sends in
///         if operation?.isCancelled == true { throw CancellationError() }
///         try sends.send(request, id: id)
///     }
///     return try await reply(id)
/// }
/// ```
public struct ResourceOperationToken: Sendable {
    let operation: ResourceOperation

    /// The calling task's innermost operation, or `nil` outside any.
    public static var current: ResourceOperationToken? { ResourceOperation.current.map(Self.init(operation:)) }

    /// `true` once the operation was cancelled (by its task, its resource, its scope or a deadline).
    public var isCancelled: Bool { operation.cancellationReason != nil }

    /// Why the operation was cancelled, if it was.
    public var cancellationReason: CancellationReason? { operation.cancellationReason }
}
