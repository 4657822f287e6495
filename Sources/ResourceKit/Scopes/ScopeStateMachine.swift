/// A scope's state and decisions as a value: whether it is open, finishing or finished, the resources it owns, its
/// deadline's timer, and its place in the cancel tree (``CancelNodeMachine``: why it was cancelled, its child nodes,
/// the waits parked on it). ``ResourceScope`` holds it under its lock (``InlineStateLock``), calls one method per
/// event, and performs what comes back after releasing the lock: it cancels handles, children and parked waits,
/// closes resources, cancels the timer. Tested without I/O (`ScopeStateMachineTests`).
///
/// Rules it keeps: a cancel acts once (the first reason counts) and never on a finished scope; a member is reached by
/// the scope's cancel exactly once (a cancel hands them all out); a resource, a child or a wait that arrives after the
/// cancel is refused or cancelled at once, with the scope's reason; once the scope is finishing nothing new is
/// admitted but the waits of its closes.
///
/// Built with its memberwise initialiser, where the scope stores it (Docs/Decisions/0006).
struct ScopeStateMachine {
    enum Phase: Sendable, Hashable {
        case open
        case finishing
        case finished
    }

    private(set) var phase: Phase = .open
    private(set) var handles = HandleList()
    /// The scope as a node of the cancel tree.
    private(set) var node = CancelNodeMachine()
    private(set) var deadlineTimer: DeadlineTimerID?

    var cancelReason: CancellationReason? { node.cancelReason }

    // MARK: Cancel

    /// What a cancel does after the lock: the resources (last first), then the members (child nodes, parked waits),
    /// which have left the machine.
    struct CancelWork {
        let handles: HandleList
        let members: CancelNodeMachine.Members
    }

    /// The scope is cancelled; `nil`: cancelled already, or finished.
    mutating func cancel(_ reason: CancellationReason) -> CancelWork? {
        guard let members = node.cancel(reason) else { return nil }
        return CancelWork(handles: handles, members: members)
    }

    // MARK: Waits

    /// A wait of the scope's task (one it runs directly, or in a child task without a node of its own) parks on it.
    /// A cancelled scope refuses it with the reason; a finished one (an unstructured task that inherited it) takes
    /// nobody.
    mutating func park(_ wait: any CancellableOperation) -> CancelNodeMachine.Park {
        node.park(wait)
    }

    /// The wait ended.
    mutating func unpark(_ wait: any CancellableOperation) {
        node.unpark(wait)
    }

    // MARK: Resources and children

    /// A resource registered in the scope: recorded, or refused with a reason (the scope is cancelled, or no
    /// longer open).
    @inline(__always)  // on every registration
    mutating func admit(_ handle: ResourceHandle) -> CancellationReason? {
        guard phase == .open else { return .cancelled }
        if let cancelReason { return cancelReason }
        handles.append(handle)
        return nil
    }

    /// A resource leaves the scope without being closed (adoption); `false` if it is not one of its live
    /// resources, or the scope is no longer open or was cancelled.
    mutating func release(_ handle: ResourceHandle) -> Bool {
        guard phase == .open, cancelReason == nil else { return false }
        return handles.remove(handle)
    }

    /// A child node (a scope or an operation begun in the scope's body) starts. A scope that is no longer open starts
    /// a child scope cancelled (`.cancelled` unless it was cancelled), without recording it
    /// (`startsCancelledWhenClosed`); an operation joins a finishing scope, and a finished one takes nobody.
    mutating func attach(_ child: any CancelNode, startsCancelledWhenClosed: Bool) -> CancelNodeMachine.Attach {
        if startsCancelledWhenClosed, phase != .open { return .cancelled(cancelReason ?? .cancelled) }
        return node.attach(child)
    }

    /// A child node ended.
    mutating func detach(_ child: any CancelNode) {
        node.detach(child)
    }

    /// The scope's own deadline's timer, armed after it was made.
    mutating func armed(_ timer: DeadlineTimerID) {
        deadlineTimer = timer
    }

    // MARK: The end

    /// What the scope's end starts with: every resource (in registration order), the timer to cancel, and whether
    /// the scope is finished already (every resource closes inline, so nothing can need its cancellation: the
    /// resources and members have left the machine) or only finishing.
    struct EndWork {
        let handles: HandleList
        let timer: DeadlineTimerID?
        let finished: Bool
    }

    @inline(__always)  // on every scope's end
    mutating func beginEnd() -> EndWork {
        let timer = deadlineTimer.take()
        guard handles.allClosingInline else {
            phase = .finishing
            return EndWork(handles: handles, timer: timer, finished: false)
        }
        phase = .finished
        // Moved out, not copied: a finished scope reads them no more.
        var taken = HandleList()
        swap(&taken, &handles)
        node.finish()
        return EndWork(handles: taken, timer: timer, finished: true)
    }

    /// The asynchronous closes of a finishing scope ended: it is finished.
    mutating func endFinished() {
        phase = .finished
        handles = HandleList()
        node.finish()
    }
}

extension ScopeStateMachine: Sendable {}
