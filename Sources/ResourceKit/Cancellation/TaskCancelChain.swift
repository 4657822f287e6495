import CSystemShims

/// The scopes and operations one task runs, as its cancellation sees them (Docs/Architecture.md, "One hook order").
///
/// Swift runs a task's cancellation handlers newest first, so a wait's own handler would resume it before the
/// handlers of the operation and the scope around it ran their stop hooks. Instead, every scope, operation and wait
/// records the scope and the operation around it *that run on the same task* (a child task's are not: a child can
/// be cancelled alone), and the first handler to run (the innermost) cancels them all, outermost first, in one
/// ``CancelPass``, then its own member; the outer handlers that Swift runs next find their nodes cancelled and do
/// nothing. A scope records its parent scope; an operation records its scope and its enclosing operation.
@usableFromInline
enum TaskCancelChain {
    /// `scope` if it runs on `task`, else `nil`.
    static func same(_ scope: ResourceScope?, task: UInt) -> ResourceScope? {
        guard let scope, scope.task == task else { return nil }
        return scope
    }

    /// `operation` if it runs on `task`, else `nil`.
    static func same(_ operation: ResourceOperation?, task: UInt) -> ResourceOperation? {
        guard let operation, operation.task == task else { return nil }
        return operation
    }

    /// The calling task was cancelled while `member` waited in `scope` and `operation` (its task's, either may be
    /// `nil`): one pass cancels them, outermost first, then `member`.
    @usableFromInline
    static func taskCancelled(
        _ member: any CancellableOperation, scope: ResourceScope?, operation: ResourceOperation?
    ) {
        var pass = CancelPass()
        if let scope { reach(scope, in: &pass) }
        if let operation { reach(operation, in: &pass) }
        member.reach(.cancelled, in: &pass)
        pass.finish()
    }

    /// The task running `scope`'s body was cancelled: the scopes around it on the task, then the scope.
    static func taskCancelled(_ scope: ResourceScope) {
        var pass = CancelPass()
        reach(scope, in: &pass)
        pass.finish()
    }

    /// The task running `operation`'s body was cancelled: the scopes and operations around it, then the operation.
    static func taskCancelled(_ operation: ResourceOperation) {
        var pass = CancelPass()
        reach(operation, in: &pass)
        pass.finish()
    }

    private static func reach(_ scope: ResourceScope, in pass: inout CancelPass) {
        if let parent = scope.taskParent { reach(parent, in: &pass) }
        scope.cancel(.cancelled, in: &pass)
    }

    private static func reach(_ operation: ResourceOperation, in pass: inout CancelPass) {
        if let scope = operation.taskScope { reach(scope, in: &pass) }
        if let enclosing = operation.taskEnclosing { reach(enclosing, in: &pass) }
        operation.reach(.cancelled, in: &pass)
    }
}

/// The running task's identity: its address, compared and never dereferenced. Two nodes with the same identity
/// run on one task while both are alive (a node lives no longer than the body its task runs). Read through the C
/// shim (`rk_current_task`), not `withUnsafeCurrentTask`, whose resilient `UnsafeCurrentTask` costs a scope's start
/// more than the rest of the task chain does (Docs/Decisions/0006); `TaskIdentityTests` checks that both name the
/// same task.
enum TaskIdentity {
    static var current: UInt { UInt(rk_current_task()) }
}
