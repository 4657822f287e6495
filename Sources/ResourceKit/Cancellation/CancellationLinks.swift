/// What a wait (``CancellationCell``) or an operation (``withResourceOperation(boundTo:deadline:onCancel:_:)``)
/// joined when it began, so that every level of cancellation reaches it (Docs/Architecture.md, "Three levels of
/// cancellation"): the enclosing operation, the resource's handle, the borrowing scope, its own deadline's timer.
/// Undone by ``leave(_:handle:)`` when it ends. Not generic: the cell's wait pays no metadata lookup for it.
@usableFromInline
package struct CancellationLinks: Sendable {
    let enclosing: ResourceOperation?
    let borrowed: ResourceScope?
    let timer: DeadlineTimerID?
    /// The member is bound to its enclosing operation's handle, in the operation's scope: the handle reaches it
    /// through the operation (which the handle's list holds), so it is counted in the registry's operations in
    /// flight but not tracked by the handle ("One route per wait").
    let reachedThroughOperation: Bool
    /// The scope and the operation around the member that run on the member's own task, which the task's
    /// cancellation cancels first (``TaskCancelChain``).
    @usableFromInline let taskScope: ResourceScope?
    @usableFromInline let taskOperation: ResourceOperation?

    /// The operation around the member runs on the member's task, inside the same scope of that task: the
    /// operation's own task handler reaches the member (a member of the operation) in the pass, and in the order,
    /// that the member's own handler would, so the member installs none (Docs/Architecture.md, "One route per
    /// wait"). A scope opened inside the operation's body on the same task keeps the member's handler: that scope's
    /// handler, newer than the operation's, would run first and alone.
    @usableFromInline var operationHandlerReaches: Bool {
        guard let taskOperation else { return false }
        return taskScope === taskOperation.taskScope
    }

    /// No operation runs around the member on its task, and the member joined its task's innermost scope as a
    /// borrower: that scope's own task handler reaches the member (in its list of borrowers, until the member
    /// leaves) in the pass and order the member's handler would, so the member installs none. A member on a
    /// resource the scope owns keeps its handler: the resource may move to another owner while it waits.
    @usableFromInline var scopeHandlerReaches: Bool {
        guard taskOperation == nil, let borrowed else { return false }
        return borrowed === taskScope
    }

    /// Links `member` to `enclosing` and to `handle` (and to `scope` as its borrowing scope unless the scope's
    /// cancellation reaches it already: ``BorrowingScope/join(_:tracked:enclosing:scope:)``), and arms `deadline`.
    /// `task` is the member's task (``TaskIdentity``), or 0 when its task's cancellation does not reach it
    /// through this link (a shielded wait, an adapter's own waiter).
    /// Any of them that is cancelled already (or a deadline already past) cancels `member` at once.
    static func link(
        _ member: any CancellableOperation,
        handle: ResourceHandle?,
        enclosing: ResourceOperation?,
        scope: ResourceScope?,
        deadline: ContinuousClock.Instant?,
        task: UInt
    ) -> CancellationLinks {
        enclosing?.add(member)
        let throughOperation = handle != nil && enclosing?.handle === handle && enclosing?.scope === scope
        if throughOperation { handle?.countUntracked(by: 1) }
        let borrowed = BorrowingScope.join(
            member, tracked: throughOperation ? nil : handle, enclosing: enclosing, scope: scope)
        var timer: DeadlineTimerID?
        if let deadline {
            if deadline <= .now {
                member.cancel(.deadlineExceeded(deadline))
            } else {
                timer = DeadlineTimers.shared.schedule(at: deadline) { [weak member] in
                    member?.cancel(.deadlineExceeded(deadline))
                }
            }
        }
        return CancellationLinks(
            enclosing: enclosing, borrowed: borrowed, timer: timer, reachedThroughOperation: throughOperation,
            taskScope: task == 0 ? nil : TaskCancelChain.same(scope, task: task),
            taskOperation: task == 0 ? nil : TaskCancelChain.same(enclosing, task: task))
    }

    /// For a waiter of an adapter's own that is not a ``CancellationCell`` (it parks on a continuation it
    /// keeps itself, as the Postgres pool's queued lease does): links `member` to the calling task's enclosing
    /// operation and innermost scope, as a cell's wait would be (bound to no handle, no deadline of its own).
    /// Either may cancel `member` at once, from inside this call. The task's own cancellation is the caller's
    /// (`withTaskCancellationHandler`). Undo with ``leave(_:)``.
    package static func joinCallersLevels(_ member: any CancellableOperation) -> CancellationLinks {
        link(
            member, handle: nil, enclosing: ResourceOperation.current, scope: ResourceScope.current, deadline: nil,
            task: 0)
    }

    /// `member`, joined with ``joinCallersLevels(_:)``, ended: it leaves everything it joined.
    package func leave(_ member: any CancellableOperation) {
        leave(member, handle: nil)
    }

    /// `member` ended: its timer is cancelled and it leaves everything it joined.
    @usableFromInline
    func leave(_ member: any CancellableOperation, handle: ResourceHandle?) {
        if let timer { DeadlineTimers.shared.cancel(timer) }
        if reachedThroughOperation {
            handle?.countUntracked(by: -1)
        } else {
            handle?.untrack(member)
        }
        enclosing?.remove(member)
        borrowed?.leave(member)
    }
}
