/// What a wait (``CancellationCell``) or an operation (``withResourceOperation(boundTo:deadline:onCancel:_:)``)
/// joined when it began, so that every level of cancellation reaches it (Docs/Architecture.md, "Three levels of
/// cancellation"): the enclosing operation, the resource's handle, the borrowing scope, its own deadline's timer.
/// Undone by ``leave(_:handle:)`` when it ends. Not generic: the cell's wait pays no metadata lookup for it.
@usableFromInline
struct CancellationLinks {
    let enclosing: ResourceOperation?
    let borrowed: ResourceScope?
    let timer: DeadlineTimerID?

    /// Links `member` to `enclosing` and to `handle` (and to `scope` as its borrowing scope unless the scope's
    /// cancellation reaches it already: ``BorrowingScope/join(_:tracked:enclosing:scope:)``), and arms `deadline`.
    /// Any of them that is cancelled already (or a deadline already past) cancels `member` at once.
    static func link(
        _ member: any CancellableOperation,
        handle: ResourceHandle?,
        enclosing: ResourceOperation?,
        scope: ResourceScope?,
        deadline: ContinuousClock.Instant?
    ) -> CancellationLinks {
        enclosing?.add(member)
        let borrowed = BorrowingScope.join(member, tracked: handle, enclosing: enclosing, scope: scope)
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
        return CancellationLinks(enclosing: enclosing, borrowed: borrowed, timer: timer)
    }

    /// `member` ended: its timer is cancelled and it leaves everything it joined.
    @usableFromInline
    func leave(_ member: any CancellableOperation, handle: ResourceHandle?) {
        if let timer { DeadlineTimers.shared.cancel(timer) }
        handle?.untrack(member)
        enclosing?.remove(member)
        borrowed?.leave(member)
    }
}
