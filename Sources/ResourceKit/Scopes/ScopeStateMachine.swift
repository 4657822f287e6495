/// A scope's state and decisions as a value: whether it is open, finishing or finished, why it was cancelled, the
/// resources it owns, its children, the operations that borrow it and its deadline's timer. ``ResourceScope`` holds
/// it under its lock (``InlineStateLock``), calls one method per event, and performs what comes back after
/// releasing the lock: it cancels handles, children and borrowers, closes resources, cancels the timer. Tested
/// without I/O (`ScopeStateMachineTests`).
///
/// Rules it keeps: a cancel acts once (the first reason counts) and never on a finished scope; a borrower is
/// cancelled by the scope's cancel exactly once (a cancel hands them all out); a resource, a child or a borrower
/// that arrives after the cancel is refused or cancelled at once, with the scope's reason; once the scope is
/// finishing nothing new is admitted.
///
/// Built with its memberwise initialiser, where the scope stores it (Docs/Decisions/0006).
struct ScopeStateMachine {
    enum Phase: Sendable, Hashable {
        case open
        case finishing
        case finished
    }

    private(set) var phase: Phase = .open
    private(set) var cancelReason: CancellationReason?
    private(set) var handles = HandleList()
    private(set) var children = [ObjectIdentifier: ResourceScope]()
    /// Operations of this scope's task on resources it does not own (they joined it).
    private(set) var borrowers = IdentityTable<any CancellableOperation>()
    private(set) var deadlineTimer: DeadlineTimerID?

    // MARK: Cancel

    /// What a cancel does after the lock: the resources (last first), the children, the borrowers (who have
    /// left the machine).
    struct CancelWork {
        let handles: HandleList
        let children: [ResourceScope]
        let borrowers: IdentityTable<any CancellableOperation>
    }

    /// The scope is cancelled; `nil`: cancelled already, or finished.
    mutating func cancel(_ reason: CancellationReason) -> CancelWork? {
        guard cancelReason == nil, phase != .finished else { return nil }
        cancelReason = reason
        defer { borrowers = IdentityTable() }
        return CancelWork(handles: handles, children: Array(children.values), borrowers: borrowers)
    }

    // MARK: Borrowers

    /// An operation on a resource the scope does not own joins it. Returns the reason to cancel it with at once
    /// (the scope was cancelled); a finished scope (an unstructured task that inherited it) takes nobody.
    mutating func join(_ operation: any CancellableOperation) -> CancellationReason? {
        if let cancelReason { return cancelReason }
        if phase != .finished { borrowers.insert(operation) }
        return nil
    }

    /// The operation ended.
    mutating func leave(_ operation: any CancellableOperation) {
        borrowers.remove(operation)
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

    /// A child scope starts. Returns the reason it starts cancelled with (the scope's; `.cancelled` once the scope
    /// is no longer open, when it is not recorded).
    mutating func attach(_ child: ResourceScope) -> CancellationReason? {
        guard phase == .open else { return cancelReason ?? .cancelled }
        children[ObjectIdentifier(child)] = child
        return cancelReason
    }

    /// A child scope ended.
    mutating func detach(_ child: ResourceScope) {
        children.removeValue(forKey: ObjectIdentifier(child))
    }

    /// The scope's own deadline's timer, armed after it was made.
    mutating func armed(_ timer: DeadlineTimerID) {
        deadlineTimer = timer
    }

    // MARK: The end

    /// What the scope's end starts with: every resource (in registration order), the timer to cancel, and whether
    /// the scope is finished already (every resource closes inline, so nothing can need its cancellation: the
    /// resources and borrowers have left the machine) or only finishing.
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
        if !borrowers.isEmpty { borrowers = IdentityTable() }
        return EndWork(handles: taken, timer: timer, finished: true)
    }

    /// The asynchronous closes of a finishing scope ended: it is finished.
    mutating func endFinished() {
        phase = .finished
        handles = HandleList()
        borrowers = IdentityTable()
    }
}

extension ScopeStateMachine: Sendable {}
