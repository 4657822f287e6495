/// One running operation of a resource, made by ``withResourceOperation(boundTo:deadline:onCancel:_:)``.
///
/// It is the current task's innermost operation (a task-local) while its body runs: every ``CancellationCell``
/// the body runs unshielded (so every `IOReactor` wait and `BlockingPool` job) and every nested operation
/// registers with it, so that cancelling the operation resumes them with the operation's reason.
@usableFromInline
final class ResourceOperation: CancellableOperation {
    /// The task-local behind ``current``, declared without the `@TaskLocal` wrapper so that the inlinable
    /// `withResourceOperation` can bind it (a wrapper's projection cannot be `@usableFromInline`).
    @usableFromInline static let currentLocal = TaskLocal<ResourceOperation?>(wrappedValue: nil)

    /// The current task's innermost operation.
    static var current: ResourceOperation? { currentLocal.get() }

    private typealias Machine = OperationStateMachine<any CancellableOperation>

    private let machine = Locked(Machine())
    private let hook: @Sendable (CancellationReason) -> Void
    /// The earliest deadline of this operation, the operations it is nested in and its task's innermost scope, in
    /// its fixed-layout form (see ``StoredInstant``).
    let storedDeadline: StoredInstant?
    /// The task's innermost scope when the operation began, whose cancellation reaches it (as the owner of its
    /// resource, through an enclosing operation, or because it joined the scope as a borrower): what the body
    /// waits on need not join that scope again.
    let scope: ResourceScope?
    /// The resource the operation is bound to, whose list holds the operation: a wait of the body bound to the same
    /// resource is reached through the operation and stays out of that list (``CancellationLinks``).
    let handle: ResourceHandle?
    /// The task that runs the body (``TaskIdentity``).
    let task: UInt
    /// The scope and the operation around this one that run on the same task (``TaskCancelChain``).
    let taskScope: ResourceScope?
    let taskEnclosing: ResourceOperation?

    init(
        onCancel hook: @escaping @Sendable (CancellationReason) -> Void, deadline: StoredInstant?,
        scope: ResourceScope?, handle: ResourceHandle?, task: UInt, taskScope: ResourceScope?,
        taskEnclosing: ResourceOperation?
    ) {
        self.hook = hook
        self.storedDeadline = deadline
        self.scope = scope
        self.handle = handle
        self.task = task
        self.taskScope = taskScope
        self.taskEnclosing = taskEnclosing
    }

    /// Marks the body as started, or throws the reason's error if a cancel came first.
    @usableFromInline
    func start() throws {
        if case .refuse(let reason) = machine.withLock({ $0.start() }) {
            throw reason.error
        }
    }

    /// Cancels the operation: its waiters are marked cancelled, the adapter's hook runs, once, on this thread,
    /// then the waiters resume with `reason` (Docs/Architecture.md, "One hook order"). Non-blocking, idempotent,
    /// any thread.
    @usableFromInline
    func cancel(_ reason: CancellationReason) {
        var pass = CancelPass()
        reach(reason, in: &pass)
        pass.finish()
    }

    /// The waiters as members of `pass` first (each decides it is cancelled, so that nothing the hook wakes can
    /// complete it instead; their resumes wait for the pass), then the hook (a nested operation's runs first).
    @usableFromInline
    func reach(_ reason: CancellationReason, in pass: inout CancelPass) {
        guard case .stop(let reason, let waiters) = machine.withLock({ $0.cancel(reason) }) else { return }
        for waiter in waiters { waiter.reach(reason, in: &pass) }
        hook(reason)
    }

    /// The task running the body was cancelled: the operations and scopes around it on the task first
    /// (``TaskCancelChain``).
    @usableFromInline
    func taskCancelled() {
        TaskCancelChain.taskCancelled(self)
    }

    /// Tracks something the body waits on; cancels it at once if the operation was cancelled already.
    func add(_ waiter: any CancellableOperation) {
        let action = machine.withLock { $0.add(waiter, id: ObjectIdentifier(waiter)) }
        if case .cancelNow(let reason) = action { waiter.cancel(reason) }
    }

    func remove(_ waiter: any CancellableOperation) {
        machine.withLock { $0.remove(id: ObjectIdentifier(waiter)) }
    }

    /// The body ended; the cancellation's reason if a cancel won first.
    @usableFromInline
    func finish() -> CancellationReason? {
        machine.withLock { $0.finish() }
    }
}
