/// One cancel that reaches several things at once (a scope's tree, a resource's operations, an operation's waits),
/// run in the one hook order every cancel source keeps (Docs/Architecture.md, "One hook order"): every wait it
/// reaches is marked cancelled as it is reached (so that nothing a hook wakes can complete it instead), every stop
/// hook runs (an operation's `onCancel` after its waits were reached, the resource's `cancel()` after its
/// operations, each wait's own `onCancel` in ``finish()``), then every wait resumes, then every `afterCancel`.
///
/// The reaching half runs where the cancel starts (``ResourceScope``, ``ResourceHandle``, ``ResourceOperation``
/// call ``CancellableOperation/reach(_:in:)`` on their members after their own locks are released); the pass only
/// collects what is left to do. A value, so that the order is tested without a thread.
@usableFromInline
package struct CancelPass {
    /// A wait whose cancel won: its hooks and the waiter to resume, run by ``finish()``.
    struct Resume {
        let hooks: CancellationHooks
        let waiter: CancellationWaiter
        let reason: CancellationReason
    }

    private var resumes: [Resume] = []
    /// Members of an adapter's own kind (not a cell, not an operation): they have no hooks of theirs, and are
    /// cancelled, in one step, with the resumes.
    private var others: [(any CancellableOperation, CancellationReason)] = []

    /// Cells reached while their `start` ran: they finish in ``finish()``, after this pass's stop hooks.
    private var held: [any HeldByPass] = []

    package init() {}

    /// A cell whose cancel was only noted (its `start` runs): its hooks and resume wait for this pass.
    mutating func hold(_ cell: any HeldByPass) {
        held.append(cell)
    }

    /// The number of waits and other members left for ``finish()`` (for tests).
    var pending: Int { resumes.count + others.count }

    /// A cell's cancel won while its waiter was parked: its hooks and its resume wait for ``finish()``.
    mutating func resume(_ waiter: CancellationWaiter, hooks: CancellationHooks, reason: CancellationReason) {
        resumes.append(Resume(hooks: hooks, waiter: waiter, reason: reason))
    }

    /// A member that is neither a cell nor an operation: cancelled in ``finish()``, with the resumes.
    mutating func cancelLater(_ member: any CancellableOperation, reason: CancellationReason) {
        others.append((member, reason))
    }

    /// Runs what the pass collected, in the hook order: every wait's `onCancel`, then every resume (and the other
    /// members' cancels), then every `afterCancel`.
    package consuming func finish() {
        // Every stop hook that reaching ran is done: a held cell whose `start` returned is this pass's to finish.
        for cell in held {
            if let late = cell.passFinished() { resumes.append(late) }
        }
        for entry in resumes { entry.hooks.before?(entry.reason) }
        for entry in resumes { entry.waiter.resume(throwing: entry.reason.error) }
        for (member, reason) in others { member.cancel(reason) }
        for entry in resumes { entry.hooks.after?(entry.reason) }
    }
}

/// A cell a ``CancelPass`` reached while its `start` ran, whose hooks and resume wait for that pass.
protocol HeldByPass: AnyObject {
    /// The pass's stop hooks are done: what the cell left to it, if its `start` returned meanwhile.
    func passFinished() -> CancelPass.Resume?
}

extension CancellableOperation {
    /// The default for an adapter's own waiter: it is cancelled with the pass's resumes.
    package func reach(_ reason: CancellationReason, in pass: inout CancelPass) {
        pass.cancelLater(self, reason: reason)
    }
}
