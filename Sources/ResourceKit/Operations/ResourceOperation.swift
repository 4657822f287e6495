/// One running operation of a resource, made by ``withResourceOperation(boundTo:deadline:onCancel:_:)``: a node of
/// the cancel tree (Docs/Architecture.md, "The cancel tree").
///
/// It is the current task's innermost operation (a task-local) while its body runs: every ``CancellationCell`` the
/// body runs unshielded (so every `IOReactor` wait and `BlockingPool` job) parks on it, and every scope or operation
/// the body begins is its child, so that cancelling the operation resumes them with the operation's reason.
@usableFromInline
final class ResourceOperation: CancellableOperation {
    /// The task-local behind ``current``, declared without the `@TaskLocal` wrapper so that the inlinable
    /// `withResourceOperation` can bind it (a wrapper's projection cannot be `@usableFromInline`).
    @usableFromInline static let currentLocal = TaskLocal<ResourceOperation?>(wrappedValue: nil)

    /// The current task's innermost operation.
    static var current: ResourceOperation? { currentLocal.get() }

    private let machine = Locked(OperationStateMachine())
    private let hook: @Sendable (CancellationReason) -> Void
    /// The earliest deadline of this operation, the operations it is nested in and its task's innermost scope, in
    /// its fixed-layout form (see ``StoredInstant``).
    let storedDeadline: StoredInstant?
    /// The task's innermost scope when the operation began: while that is still the innermost scope, the operation is
    /// the task's innermost node (``CancelTree/current``).
    let scope: ResourceScope?
    /// The resource the operation is bound to, whose set holds the operation: a wait of the body bound to the same
    /// resource is reached through the operation and stays out of that set (``CancellationLinks``).
    let handle: ResourceHandle?
    /// The task that runs the body (``TaskIdentity``).
    let task: UInt
    /// The node the operation began in: its task's innermost node then (``CancelTree/innermost(in:)``).
    let parentNode: (any CancelNode)?

    init(
        onCancel hook: @escaping @Sendable (CancellationReason) -> Void, deadline: StoredInstant?,
        scope: ResourceScope?, handle: ResourceHandle?, task: UInt, parentNode: (any CancelNode)? = nil
    ) {
        self.hook = hook
        self.storedDeadline = deadline
        self.scope = scope
        self.handle = handle
        self.task = task
        self.parentNode = parentNode
    }

    /// Marks the body as started, or throws the reason's error if a cancel came first.
    @usableFromInline
    func start() throws {
        if case .refuse(let reason) = machine.withLock({ $0.start() }) {
            throw reason.error
        }
    }

    /// Cancels the operation: its members are marked cancelled, the adapter's hook and every stop hook below it run,
    /// once, on this thread, then the waits resume with `reason` (Docs/Architecture.md, "The cancel tree").
    /// Non-blocking, idempotent, any thread.
    @usableFromInline
    func cancel(_ reason: CancellationReason) {
        var pass = CancelPass()
        reach(reason, in: &pass)
        pass.finish()
    }

    /// The task running the body was cancelled (its handler, when the operation is its task's entry).
    @usableFromInline
    func taskCancelled() {
        cancel(.cancelled)
    }

    /// The reason of the cancel that reached the operation, if one did (``ResourceOperationToken``).
    var cancellationReason: CancellationReason? {
        machine.withLock { $0.reason }
    }

    /// The body ended; the cancellation's reason if a cancel won first.
    @usableFromInline
    func finish() -> CancellationReason? {
        machine.withLock { $0.finish() }
    }

    /// The body threw: ``finish()``, after delivering a cancel of the task that the task's handler has not.
    ///
    /// The runtime marks a task cancelled first and runs its cancellation handlers after; a body that sees the mark
    /// in between (a `Task.checkCancellation()`) and throws leaves `withTaskCancellationHandler` before the handler
    /// runs, and then it never runs. Without this the operation would end cancelled with its work still running
    /// outside the process (Docs/Architecture.md, "The cancel tree": a pending cancel is delivered where the task is
    /// seen cancelled). Idempotent with the handler: a cancel acts once.
    @usableFromInline
    func finishThrowing(taskIsCancelled: Bool = Task.isCancelled) -> CancellationReason? {
        if taskIsCancelled { deliverPendingTaskCancel() }
        return finish()
    }
}

extension ResourceOperation: CancelNode {
    /// Marks the operation and its members (the body's waits, nested scopes and operations), the operation's hook
    /// first and theirs after it (top down); the hooks run, and the waits resume, when `pass` finishes.
    @usableFromInline
    func reach(_ reason: CancellationReason, in pass: inout CancelPass) {
        guard case .stop(let reason, let members) = machine.withLock({ $0.cancel(reason) }) else { return }
        pass.stop(hook, reason)
        members.children.forEach { $0.reach(reason, in: &pass) }
        members.parked.forEach { $0.reach(reason, in: &pass) }
    }

    func park(_ wait: any CancellableOperation) -> CancelNodeMachine.Park {
        machine.withLock { $0.park(wait) }
    }

    func unpark(_ wait: any CancellableOperation) {
        machine.withLock { $0.unpark(wait) }
    }

    func attach(_ child: any CancelNode) -> CancelNodeMachine.Attach {
        machine.withLock { $0.attach(child) }
    }

    func detach(_ child: any CancelNode) {
        machine.withLock { $0.detach(child) }
    }

    var boundHandle: ResourceHandle? { handle }
}
