import Synchronization

/// A lifetime for resources, bound to the task that runs ``withResourceScope(_:deadline:registry:isolation:_:)``.
///
/// Resources registered in a scope are closed last-acquired-first when the scope's body returns, throws or
/// is cancelled. When the owning task is cancelled, every live resource gets ``ManagedResource/cancel()`` at
/// once, from inside `withTaskCancellationHandler`. Scopes nest through the task-local ``current``: cancelling
/// a parent cancels its children; ``cancel()`` cancels one scope (and its children) only.
///
/// Cancellation is level-triggered: once cancelled (by the task, ``cancel()`` or the deadline), a scope stays
/// cancelled; registering into it cancels and closes the new resource at once and throws.
///
/// A scope also reaches what its task *borrows* (Docs/Architecture.md, "Three levels of cancellation", "The cancel
/// tree"): every wait the task runs through ResourceKit (a ``CancellationCell``, so every `IOReactor` wait,
/// `BlockingPool` job and ``withResourceOperation(boundTo:deadline:onCancel:_:)``) parks on the task's innermost scope
/// or operation, whether or not that scope owns the resource (a pooled connection, one an outer scope owns, a pool's
/// wait for a free connection). Cancelling the scope (``cancel()``, a parent's cancel, its deadline) then stops that
/// operation at the operation level, with the scope's reason, and a resource the scope does not own lives on.
/// Unstructured tasks inherit the scope with the other task-locals; background work a resource owns must not (start
/// it inside ``withoutResourceScope(_:)``, which clears the scope and the enclosing operation both, or through
/// `ResourceOwner`).
///
/// What a scope does *not* do: it cannot interrupt awaits that do not go through ResourceKit (a plain
/// `Task.sleep` in the body keeps sleeping after ``cancel()``); call ``checkCancellation()`` between steps, or
/// cancel the task itself.
public final class ResourceScope: Sendable, CustomStringConvertible {
    /// The innermost scope of the current task, if any.
    @TaskLocal public static var current: ResourceScope?

    /// The scope's own label.
    public let label: String
    /// Labels from the root scope down to this one, joined by `/`.
    public let path: String
    /// The effective deadline: the minimum of this scope's and its parent's.
    public var deadline: ContinuousClock.Instant? { storedDeadline.instant }
    /// Kept in a fixed-layout form (see ``StoredInstant``).
    let storedDeadline: StoredInstant?
    /// The registry that records this scope's resources.
    public let registry: ResourceRegistry

    let parent: ResourceScope?
    /// The node the scope began in (Docs/Architecture.md, "The cancel tree"): its task's innermost node then, a
    /// scope or an operation; `nil` for a root.
    let parentNode: (any CancelNode)?
    /// The task that runs the scope's body (``TaskIdentity``); 0 for a scope no body runs in (a handle's parts).
    let task: UInt
    /// The scope is its task's entry into the tree: it installs the task's cancellation handler, which cancels it
    /// and so every node and wait below it on the task (``CancelTree/isTaskEntry(under:task:)``). Decided in `init`,
    /// once the scope has attached, and read by the scope's own task after it.
    @usableFromInline var isTaskEntry: Bool { taskEntry.load(ordering: .relaxed) }
    private let taskEntry: Atomic<Bool>

    /// The scope's state and decisions (``ScopeStateMachine``), held inline: see ``InlineStateLock``. Every method
    /// below makes one decision under this lock and acts after it.
    private let state = InlineStateLock(ScopeStateMachine())
    /// Operations running now that began with this scope as their task's innermost (``CancelTree/current`` reads the
    /// operation's task-local only when there are some).
    let operationsInBody = Atomic<Int>(0)

    init(
        label: String, parent: ResourceScope?, deadline ownDeadline: ContinuousClock.Instant?,
        registry: ResourceRegistry?, armsDeadline: Bool = true, pathPrefix: String = "", task: UInt = 0,
        parentNode: (any CancelNode)? = nil
    ) {
        self.label = label
        self.parent = parent
        self.task = task
        self.parentNode = parentNode
        self.taskEntry = Atomic(CancelTree.isTaskEntry(under: parentNode, task: task))
        self.path = parent.map { "\($0.path)/\(label)" } ?? (pathPrefix.isEmpty ? label : "\(pathPrefix)/\(label)")
        let ownStored = ownDeadline.stored
        self.storedDeadline = Deadlines.earliest(ownStored, parent?.storedDeadline)
        self.registry = registry ?? parent?.registry ?? .shared

        if let parentNode {
            switch parentNode.attach(self) {
            case .attached: break
            case .cancelled(let reason): cancel(reason)
            case .notTracked:
                // An operation that has ended (an unstructured task that inherited it): its scope takes the child.
                // No node of this task reaches the scope then, so it is its task's entry whatever the identities
                // say (a dead task's address can be the running task's; TaskIdentity).
                taskEntry.store(true, ordering: .relaxed)
                if let parent, parent !== parentNode, case .cancelled(let reason) = parent.attach(self) {
                    cancel(reason)
                }
            }
        }
        // Only a deadline earlier than the parent's needs a timer of its own; the parent's timer reaches the
        // children through cancel propagation.
        // A handle's parts take its deadline without a timer: the handle's cancellation reaches them.
        // Tested on the stored form: `ContinuousClock.Instant?` is tested through run-time calls (see StoredInstant).
        if armsDeadline, let ownStored, parent?.storedDeadline.map({ ownStored < $0 }) ?? true {
            let own = ownStored.instant
            if own <= .now {
                cancel(.deadlineExceeded(own))
            } else {
                let timer = DeadlineTimers.shared.schedule(at: own) { [weak self] in
                    self?.cancel(.deadlineExceeded(own))
                }
                state.withLock { $0.armed(timer) }
            }
        }
    }

    public var description: String { "ResourceScope(\(path))" }

    /// Why the scope was cancelled, if it was.
    public var cancellationReason: CancellationReason? { state.withLock { $0.cancelReason } }

    /// `true` once the scope was cancelled (by its task, ``cancel()``, a parent or the deadline).
    public var isCancelled: Bool { cancellationReason != nil }

    /// Number of resources registered and not yet closed by the scope.
    public var resourceCount: Int { state.withLock { $0.handles.count } }

    /// Number of members the scope's node holds now: child scopes and operations, parked waits (for tests).
    var memberCount: Int { state.withLock { $0.node.memberCount } }

    /// Throws `CancellationError` or ``DeadlineExceededError`` if the scope was cancelled.
    public func checkCancellation() throws {
        if let reason = cancellationReason { throw reason.error }
    }

    /// Cancels this scope and its children now: every live resource gets `cancel()`, every operation bound to
    /// them resumes with `CancellationError`. Idempotent; non-blocking; callable from any thread. The scope's
    /// resources are still closed when its body ends.
    public func cancel() {
        cancel(.cancelled)
    }

    @usableFromInline
    func cancel(_ reason: CancellationReason) {
        var pass = CancelPass()
        reach(reason, in: &pass)
        pass.finish()
    }

    /// The scope's task was cancelled (its handler, when the scope is its task's entry).
    @usableFromInline
    func taskCancelled() {
        cancel(.cancelled)
    }

    /// A scope for `withResourceScope`'s body on the calling task: a child of the task's innermost node (a scope, or
    /// an operation that began in it), whose path, deadline and registry come from the task's innermost scope.
    @usableFromInline
    static func entered(
        label: String, deadline: ContinuousClock.Instant?, registry: ResourceRegistry?
    ) -> ResourceScope {
        let parent = ResourceScope.current
        return ResourceScope(
            label: label, parent: parent, deadline: deadline, registry: registry,
            task: TaskIdentity.current, parentNode: CancelTree.innermost(in: parent))
    }

    /// Registers `resource` in this scope; it will be closed when the scope ends.
    ///
    /// Cancellation: if the scope is already cancelled or finished, the resource is cancelled and closed at
    /// once and the call throws the scope's cancellation error (`CancellationError`, or
    /// ``DeadlineExceededError`` after the deadline).
    /// - Throws: also ``ResourceKitError/Code/alreadyRegistered`` if the object is registered already.
    @inlinable @discardableResult
    public func register(_ resource: some ManagedResource, kind: ResourceKind, label: String)
        async throws -> ResourceHandle
    {
        // The accepted case needs no async frame of its own (Docs/Architecture.md, "The cost of a scope").
        let (handle, rejection) = try admit(RegisteredResource(resource), kind: kind, label: label)
        if let rejection { try await reject(handle, rejection) }
        return handle
    }

    /// Registers `resource` in this scope; it will be closed when the scope ends, without an async frame of its
    /// own (``SynchronouslyClosedResource``).
    ///
    /// The same as the general form, ``register(_:kind:label:)-(ManagedResource,_,_)``; chosen by the compiler where
    /// the resource's type is known to close synchronously, it skips the run-time conformance look-up that the general
    /// form makes (Docs/Architecture.md, "The cost of a scope").
    ///
    /// Cancellation: if the scope is already cancelled or finished, the resource is cancelled and closed at
    /// once and the call throws the scope's cancellation error (`CancellationError`, or
    /// ``DeadlineExceededError`` after the deadline).
    /// - Throws: also ``ResourceKitError/Code/alreadyRegistered`` if the object is registered already.
    @inlinable @discardableResult
    public func register(
        _ resource: some SynchronouslyClosedResource, kind: ResourceKind, label: String
    ) async throws -> ResourceHandle {
        let (handle, rejection) = try admit(.synchronous(resource), kind: kind, label: label)
        if let rejection { try await reject(handle, rejection) }
        return handle
    }

    /// Registers `resource` with the registry and, unless the scope is no longer open or was cancelled, records
    /// its handle; else returns the reason to refuse it with (``reject(_:_:)``).
    @usableFromInline
    func admit(_ resource: RegisteredResource, kind: ResourceKind, label: String) throws -> (
        ResourceHandle, CancellationReason?
    ) {
        let handle = try registry.register(
            resource, kind: kind, label: label, scopePath: path, deadline: storedDeadline)
        let rejection = state.withLock { $0.admit(handle) }
        return (handle, rejection)
    }

    /// A registration the scope refused: the resource is cancelled and closed at once, and the call throws.
    @usableFromInline
    func reject(_ handle: ResourceHandle, _ reason: CancellationReason) async throws {
        registry.didReject(handle)
        handle.cancel(reason)
        await handle.close()
        throw reason.error
    }

    /// Removes `handle` from this scope without closing it (adoption by a `ResourceOwner`). Returns `false`
    /// if the handle is not one of this scope's live resources, or the scope is no longer open.
    package func release(_ handle: ResourceHandle) -> Bool {
        state.withLock { $0.release(handle) }
    }

    /// Ends the scope: closes every resource, last acquired first, each shielded and bounded.
    func finish() async {
        if let rest = finishInline() { await finish(rest) }
    }

    /// What is left of a scope's end after ``finishInline()``: the handles still to close, in registration order,
    /// and those already found closing elsewhere.
    @usableFromInline
    struct Unfinished: Sendable {
        let handles: Slice<HandleList>
        var stillClosing: [ResourceHandle]
    }

    /// Starts the scope's end and closes, last acquired first, every resource that closes without suspending
    /// (``ResourceHandle/closeInline()``): a scope whose resources are all ``SynchronouslyClosedResource``s ends
    /// here, with no async frame. Returns the rest for ``finish(_:)`` at the first resource that needs one.
    @usableFromInline
    func finishInline() -> Unfinished? {
        // When every resource closes inline (the common scope), the scope is finished in this one lock round trip:
        // the closes below run on this task and nothing interrupts them, so no cancellation needs to reach them.
        let work = state.withLock { $0.beginEnd() }
        let (handles, finished) = (work.handles, work.finished)
        if let timer = work.timer { DeadlineTimers.shared.cancel(timer) }
        var stillClosing: [ResourceHandle] = []
        let timed = registry.publishesEvents
        var end = handles.endIndex
        while end > handles.startIndex {
            let handle = handles[end - 1]
            guard let outcome = handle.closeInline(timed: timed) else {
                return Unfinished(handles: handles[..<end], stillClosing: stillClosing)
            }
            if case .alreadyClosed = outcome { stillClosing.append(handle) }
            end -= 1
        }
        complete(stillClosing: stillClosing, finished: finished)
        return nil
    }

    /// The body threw: ``finishInline()``, after delivering a cancel of the task that the task's handler has not.
    ///
    /// The runtime marks a task cancelled first and runs its handlers after; when the body throws in between, its
    /// resources would be closed without their `cancel()`, and a handler that runs after the scope has ended
    /// reaches nothing (Docs/Architecture.md, "The cancel tree"). Idempotent with the handler.
    @usableFromInline
    func finishInlineThrowing(taskIsCancelled: Bool = Task.isCancelled) -> Unfinished? {
        if taskIsCancelled { deliverPendingTaskCancel() }
        return finishInline()
    }

    /// Closes what ``finishInline()`` left, each shielded and bounded, and ends the scope.
    @usableFromInline
    func finish(_ rest: Unfinished) async {
        var stillClosing = rest.stillClosing
        for handle in rest.handles.reversed() {
            if case .alreadyClosed = await handle.close() { stillClosing.append(handle) }
        }
        complete(stillClosing: stillClosing)
    }

    /// Ends the scope; `finished` when ``finishInline()`` marked it finished already.
    private func complete(stillClosing: [ResourceHandle], finished: Bool = false) {
        // Closed by someone else (an adapter, an owner) who has not finished yet: report it.
        for handle in stillClosing.reversed() where handle.phase != .closed {
            registry.didLeak(handle, reason: .unclosedAtScopeEnd)
        }
        if !finished {
            state.withLock { $0.endFinished() }
        }
        parentNode?.detach(self)
        if let parent, parent !== parentNode { parent.detach(self) }
    }
}

extension ResourceScope: CancelNode {
    /// Cancels the scope as part of `pass` (Docs/Architecture.md, "The cancel tree"): marks it, then reaches, top
    /// down, its resources (last acquired first: each resource's operations, its `cancel()`, its parts), its child
    /// nodes and the waits parked on it. The stop hooks run, and the waits resume, when the pass finishes.
    func reach(_ reason: CancellationReason, in pass: inout CancelPass) {
        guard let work = state.withLock({ $0.cancel(reason) }) else { return }
        for handle in work.handles.reversed() {
            handle.cancel(reason, in: &pass)
        }
        work.members.children.forEach { $0.reach(reason, in: &pass) }
        work.members.parked.forEach { $0.reach(reason, in: &pass) }
    }

    func park(_ wait: any CancellableOperation) -> CancelNodeMachine.Park {
        state.withLock { $0.park(wait) }
    }

    func unpark(_ wait: any CancellableOperation) {
        state.withLock { $0.unpark(wait) }
    }

    func attach(_ child: any CancelNode) -> CancelNodeMachine.Attach {
        state.withLock { $0.attach(child, startsCancelledWhenClosed: child is ResourceScope) }
    }

    func detach(_ child: any CancelNode) {
        state.withLock { $0.detach(child) }
    }

    var boundHandle: ResourceHandle? { nil }
}
