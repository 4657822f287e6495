/// Where a wait (``CancellationCell``) or an operation (``withResourceOperation(boundTo:deadline:onCancel:_:)``)
/// stands while it runs (Docs/Architecture.md, "The cancel tree"): on its task's innermost node (a wait parks on it,
/// an operation is its child), in its resource's set (the resource's own cancel and close reach it there), and its
/// own deadline's timer. Undone by ``leave(_:handle:)`` when it ends. Not generic: the cell's wait pays no metadata
/// lookup for it.
@usableFromInline
package struct CancellationLinks: Sendable {
    /// The node the member parked on (a wait) or is a child of (an operation), while it is tracked there.
    let node: (any CancelNode)?
    let timer: DeadlineTimerID?
    /// The member is bound to its node's own resource (its node is an operation bound to the same handle): the
    /// resource's set holds the operation, which reaches the member, so the member is counted in the registry's
    /// operations in flight but not held in that set.
    let reachedThroughOperation: Bool
    /// The member is its task's entry into the tree (``CancelTree/isTaskEntry(under:task:)``): it installs the task's
    /// cancellation handler. `false` for an adapter's own waiter, which installs its own.
    @usableFromInline let isTaskEntry: Bool

    /// A wait: parks on `node` (the task's innermost, unless the wait is shielded), joins `handle`'s set unless
    /// `node` is an operation bound to `handle`, and arms `deadline`. Any of them that is cancelled already (or a
    /// deadline already past) cancels `wait` at once, before it starts.
    static func link(
        wait: any CancellableOperation,
        handle: ResourceHandle?,
        node: (any CancelNode)?,
        deadline: ContinuousClock.Instant?,
        isTaskEntry: Bool
    ) -> CancellationLinks {
        let throughOperation = track(wait, on: handle, node: node)
        var parkedOn: (any CancelNode)?
        if let node {
            switch node.park(wait) {
            case .parked: parkedOn = node
            case .alreadyCancelled(let reason): wait.cancel(reason)
            case .notTracked: break
            }
        }
        // A wait its node did not take (it had ended) is reached by no node: it is its task's entry whatever the
        // identities say (a dead task's address can be the running task's; TaskIdentity).
        return CancellationLinks(
            node: parkedOn, timer: arm(deadline, for: wait),
            reachedThroughOperation: throughOperation, isTaskEntry: isTaskEntry || (node != nil && parkedOn == nil))
    }

    /// An operation: a child of `parent` (the task's innermost node), in `handle`'s set unless `parent` is an
    /// operation bound to `handle`, with `deadline` armed. Any of them that is cancelled already cancels the
    /// operation at once, before its body starts.
    static func link(
        operation: ResourceOperation,
        handle: ResourceHandle?,
        parent: (any CancelNode)?,
        deadline: ContinuousClock.Instant?
    ) -> CancellationLinks {
        CancelTree.count(operationIn: operation.scope, by: 1)
        let throughOperation = track(operation, on: handle, node: parent)
        var childOf: (any CancelNode)?
        if let parent {
            switch parent.attach(operation) {
            case .attached: childOf = parent
            case .cancelled(let reason): operation.cancel(reason)
            case .notTracked: break
            }
        }
        // An operation its parent did not take (it had ended) is reached by no node: it is its task's entry whatever
        // the identities say (a dead task's address can be the running task's; TaskIdentity).
        return CancellationLinks(
            node: childOf, timer: arm(deadline, for: operation),
            reachedThroughOperation: throughOperation,
            isTaskEntry: childOf == nil || CancelTree.isTaskEntry(under: parent, task: operation.task))
    }

    /// For a waiter of an adapter's own that is not a ``CancellationCell`` (it parks on a continuation it
    /// keeps itself, as the Postgres pool's queued lease does): parks `member` on the calling task's innermost node,
    /// as a cell's wait would (bound to no handle, no deadline of its own). A cancelled node cancels `member` at once,
    /// from inside this call. The task's own cancellation is the caller's (`withTaskCancellationHandler`). Undo with
    /// ``leave(_:)``.
    package static func joinCallersLevels(_ member: any CancellableOperation) -> CancellationLinks {
        link(wait: member, handle: nil, node: CancelTree.current, deadline: nil, isTaskEntry: false)
    }

    /// `member`, joined with ``joinCallersLevels(_:)``, ended: it leaves everything it joined.
    package func leave(_ member: any CancellableOperation) {
        leave(member, handle: nil)
    }

    /// The wait `member` ended: its timer is cancelled and it leaves everything it joined.
    @usableFromInline
    func leave(_ member: any CancellableOperation, handle: ResourceHandle?) {
        leaveHandle(member, handle: handle)
        node?.unpark(member)
    }

    /// The operation ended: its timer is cancelled and it leaves its resource's set and its parent.
    @usableFromInline
    func leave(_ operation: ResourceOperation, handle: ResourceHandle?) {
        leaveHandle(operation, handle: handle)
        node?.detach(operation)
        CancelTree.count(operationIn: operation.scope, by: -1)
    }

    private func leaveHandle(_ member: any CancellableOperation, handle: ResourceHandle?) {
        if let timer { DeadlineTimers.shared.cancel(timer) }
        if reachedThroughOperation {
            handle?.countUntracked(by: -1)
        } else {
            handle?.untrack(member)
        }
    }

    /// Puts `member` in `handle`'s set (which cancels it at once when the resource is cancelled or closing), or only
    /// counts it when `node` is an operation bound to the same resource. Returns whether it was only counted.
    private static func track(
        _ member: any CancellableOperation, on handle: ResourceHandle?, node: (any CancelNode)?
    ) -> Bool {
        guard let handle else { return false }
        if let node, node.boundHandle === handle {
            handle.countUntracked(by: 1)
            return true
        }
        handle.track(member)
        return false
    }

    private static func arm(_ deadline: ContinuousClock.Instant?, for member: any CancellableOperation)
        -> DeadlineTimerID?
    {
        guard let deadline else { return nil }
        if deadline <= .now {
            member.cancel(.deadlineExceeded(deadline))
            return nil
        }
        return DeadlineTimers.shared.schedule(at: deadline) { [weak member] in
            member?.cancel(.deadlineExceeded(deadline))
        }
    }
}
