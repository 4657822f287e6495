/// What one cancel does, in the one hook order (Docs/Architecture.md, "The cancel tree"): the cancel walks the tree
/// from the node (or resource) it starts at, top down, and every node and wait it reaches is marked cancelled as it is
/// reached (so that nothing a hook wakes can complete a wait instead); the pass collects what that leaves to do and
/// ``finish()`` does it: every stop hook in the order the walk reached it (an operation's `onCancel`, a resource's
/// `cancel()`), then every wait's own `onCancel`, then every resume, then every `afterCancel`.
///
/// A value, so that the order is tested without a thread.
@usableFromInline
package struct CancelPass {
    /// A wait whose cancel won: its hooks and the waiter to resume, run by ``finish()``.
    struct Resume {
        let hooks: CancellationHooks
        let waiter: CancellationWaiter
        let reason: CancellationReason
    }

    /// The stop hooks, in the order the walk reached their nodes and resources (top down).
    private var stops: [Stop] = []
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

    /// A stop hook the walk reached.
    private enum Stop {
        case operation(@Sendable (CancellationReason) -> Void, CancellationReason)
        case resource(any ManagedResource)
    }

    /// The number of waits and other members left for ``finish()`` (for tests).
    var pending: Int { resumes.count + others.count }

    /// An operation the walk reached: its `onCancel` runs in ``finish()``, in the walk's order.
    mutating func stop(_ hook: @escaping @Sendable (CancellationReason) -> Void, _ reason: CancellationReason) {
        stops.append(.operation(hook, reason))
    }

    /// A resource the walk reached: its `cancel()` runs in ``finish()``, in the walk's order.
    mutating func stop(_ resource: any ManagedResource) {
        stops.append(.resource(resource))
    }

    /// A cell's cancel won while its waiter was parked: its hooks and its resume wait for ``finish()``.
    mutating func resume(_ waiter: CancellationWaiter, hooks: CancellationHooks, reason: CancellationReason) {
        resumes.append(Resume(hooks: hooks, waiter: waiter, reason: reason))
    }

    /// A member that is neither a cell nor an operation: cancelled in ``finish()``, with the resumes.
    mutating func cancelLater(_ member: any CancellableOperation, reason: CancellationReason) {
        others.append((member, reason))
    }

    /// Runs what the pass collected, in the hook order: every stop hook, every wait's `onCancel`, then every resume
    /// (and the other members' cancels), then every `afterCancel`.
    package consuming func finish() {
        for stop in stops {
            switch stop {
            case .operation(let hook, let reason): hook(reason)
            case .resource(let resource): resource.cancel()
            }
        }
        // Every stop hook is done: a held cell whose `start` returned is this pass's to finish.
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
