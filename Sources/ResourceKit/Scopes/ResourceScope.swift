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
/// A scope also reaches what its task *borrows* (Docs/Architecture.md, "Three levels of cancellation"): every
/// wait the task runs through ResourceKit (a ``CancellationCell``, so every `IOReactor` wait, `BlockingPool`
/// job and ``withResourceOperation(boundTo:deadline:onCancel:_:)``) joins the task's innermost scope when that
/// scope does not own the resource (a pooled connection, one an outer scope owns, a pool's wait for a free
/// connection). Cancelling the scope (``cancel()``, a parent's cancel, its deadline) then stops that operation at
/// the operation level, with the scope's reason, and the resource lives on. Unstructured tasks inherit the
/// scope with the other task-locals; background work a resource owns must not (start it inside
/// ``withoutResourceScope(_:)``, which clears the scope and the enclosing operation both, or through
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
    /// The task that runs the scope's body (``TaskIdentity``); 0 for a scope no body runs in (an owner's, a
    /// handle's parts).
    let task: UInt
    /// The parent scope if it runs on the same task (``TaskCancelChain``).
    let taskParent: ResourceScope?

    /// The scope's state and decisions (``ScopeStateMachine``), held inline: see ``InlineStateLock``. Every method
    /// below makes one decision under this lock and acts after it.
    private let state = InlineStateLock(ScopeStateMachine())

    init(
        label: String, parent: ResourceScope?, deadline ownDeadline: ContinuousClock.Instant?,
        registry: ResourceRegistry?, armsDeadline: Bool = true, pathPrefix: String = "", task: UInt = 0
    ) {
        self.label = label
        self.parent = parent
        self.task = task
        self.taskParent = task == 0 ? nil : TaskCancelChain.same(parent, task: task)
        self.path = parent.map { "\($0.path)/\(label)" } ?? (pathPrefix.isEmpty ? label : "\(pathPrefix)/\(label)")
        let ownStored = ownDeadline.stored
        self.storedDeadline = Deadlines.earliest(ownStored, parent?.storedDeadline)
        self.registry = registry ?? parent?.registry ?? .shared

        if let parent, let inherited = parent.attachChild(self) {
            cancel(inherited)
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

    /// Number of operations on resources the scope does not own that joined it now (for tests).
    var borrowerCount: Int { state.withLock { $0.borrowers.count } }

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
        cancel(reason, in: &pass)
        pass.finish()
    }

    /// Cancels the scope as part of `pass`: its resources' `cancel()` and their operations' hooks run now, the
    /// waits resume when the pass finishes (Docs/Architecture.md, "One hook order").
    func cancel(_ reason: CancellationReason, in pass: inout CancelPass) {
        guard let work = state.withLock({ $0.cancel(reason) }) else { return }
        for handle in work.handles.reversed() {
            handle.cancel(reason, in: &pass)
        }
        for child in work.children {
            child.cancel(reason, in: &pass)
        }
        work.borrowers.forEach { $0.reach(reason, in: &pass) }
    }

    /// The scope's task was cancelled: the operations and scopes around it on the task first
    /// (``TaskCancelChain``).
    @usableFromInline
    func taskCancelled() {
        TaskCancelChain.taskCancelled(self)
    }

    /// A scope for `withResourceScope`'s body on the calling task: a child of the task's innermost scope, and a
    /// link in the task's chain (``TaskCancelChain``).
    @usableFromInline
    static func entered(
        label: String, deadline: ContinuousClock.Instant?, registry: ResourceRegistry?
    ) -> ResourceScope {
        ResourceScope(
            label: label, parent: ResourceScope.current, deadline: deadline, registry: registry,
            task: TaskIdentity.current)
    }

    /// An operation of this scope's task on a resource the scope does not own joins it: cancelling the scope
    /// cancels the operation with the scope's reason (the operation level: the resource lives on). Cancels it
    /// at once if the scope was cancelled already; does nothing once the scope has finished (an unstructured
    /// task that inherited it). Pair with ``leave(_:)``.
    func join(_ operation: any CancellableOperation) {
        if let reason = state.withLock({ $0.join(operation) }) { operation.cancel(reason) }
    }

    /// The operation ended.
    func leave(_ operation: any CancellableOperation) {
        state.withLock { $0.leave(operation) }
    }

    /// Whether this scope is `scope` or one of its ancestors: its cancellation reaches `scope`.
    func encloses(_ scope: ResourceScope) -> Bool {
        var candidate: ResourceScope? = scope
        while let current = candidate {
            if current === self { return true }
            candidate = current.parent
        }
        return false
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
            resource, kind: kind, label: label, scopePath: path, deadline: storedDeadline, owner: self)
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

    private func attachChild(_ child: ResourceScope) -> CancellationReason? {
        state.withLock { $0.attach(child) }
    }

    private func detachChild(_ child: ResourceScope) {
        state.withLock { $0.detach(child) }
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
        parent?.detachChild(self)
    }
}
