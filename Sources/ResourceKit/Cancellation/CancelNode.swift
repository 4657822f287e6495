import CSystemShims
import Synchronization

/// A node of the cancel tree (Docs/Architecture.md, "The cancel tree"): a scope or an operation. A node's parent is
/// the node its body began in (the innermost node of the task that started it, which for a child task's first node is
/// the node that spawned it); its members are its child nodes and the waits parked on it. Cancelling a node marks it
/// and everything below it, collects the stop hooks top-down, and runs them before any wait resumes (``CancelPass``).
protocol CancelNode: AnyObject, Sendable {
    /// The task that runs the node's body (``TaskIdentity``); 0 for a scope no body runs in (a handle's parts).
    var task: UInt { get }

    /// The node this one began in (its task's innermost node then); `nil` for a root.
    var parentNode: (any CancelNode)? { get }

    /// The resource an operation node is bound to (`nil` for a scope): a wait of its body bound to the same resource
    /// is reached through the operation, which the resource's own set holds, and stays out of that set.
    var boundHandle: ResourceHandle? { get }

    /// Cancels the node and its subtree with `reason`, in a pass of its own (``CancelPass``); idempotent.
    func cancel(_ reason: CancellationReason)

    /// Marks the node and its subtree cancelled with `reason`, collecting their stop hooks and waits into `pass`.
    func reach(_ reason: CancellationReason, in pass: inout CancelPass)

    /// A wait (or an adapter's own waiter) of the node's body parks on it; see ``CancelNodeMachine/park(_:)``.
    func park(_ wait: any CancellableOperation) -> CancelNodeMachine.Park

    /// The wait ended.
    func unpark(_ wait: any CancellableOperation)

    /// A node begins in this one's body; see ``CancelNodeMachine/attach(_:)``.
    func attach(_ child: any CancelNode) -> CancelNodeMachine.Attach

    /// The child node ended.
    func detach(_ child: any CancelNode)
}

extension CancelNode {
    /// The work of the task's cancellation handler, done by the node itself where its body threw in a cancelled task
    /// (Docs/Architecture.md, "The cancel tree": a cancel the handler never delivers). The task's entry node (this
    /// one, or the first node above it on its task) is cancelled, top down, as the handler would; then this node, in
    /// case the walk up crossed a node that has ended (which reaches nothing). Both act once, whoever comes first.
    func deliverPendingTaskCancel() {
        var entry: any CancelNode = self
        while let parent = entry.parentNode, parent.task == task { entry = parent }
        entry.cancel(.cancelled)
        if entry !== self { cancel(.cancelled) }
    }
}

/// The cancel tree as one task sees it.
enum CancelTree {
    /// The calling task's innermost node: its innermost operation when that began in its innermost scope, else the
    /// scope (an operation records the scope it began in).
    ///
    /// The operation's task-local is read only when an operation that began in that scope (or in no scope) runs
    /// now, anywhere: a task-local that is not bound is looked up along the task's whole chain of task-locals, and
    /// every scope's start would pay that miss (Benchmarks/History.md, 2026-12-06). An operation counts itself before
    /// its body runs and uncounts itself after, on its own task, so one that is innermost here is always counted.
    static var current: (any CancelNode)? { innermost(in: ResourceScope.current) }

    /// ``current`` for a caller that has read the task's innermost scope already (it is `scope`).
    static func innermost(in scope: ResourceScope?) -> (any CancelNode)? {
        let operations =
            scope?.operationsInBody.load(ordering: .relaxed) ?? operationsOutsideScopes.load(ordering: .relaxed)
        guard operations > 0, let operation = ResourceOperation.current, operation.scope === scope else {
            return scope
        }
        return operation
    }

    /// Operations running now that began in no scope (``current``).
    static let operationsOutsideScopes = Atomic<Int>(0)

    /// An operation that began in `scope` starts (`1`) or ends (`-1`): see ``current``.
    static func count(operationIn scope: ResourceScope?, by delta: Int) {
        if let scope {
            scope.operationsInBody.add(delta, ordering: .relaxed)
        } else {
            operationsOutsideScopes.add(delta, ordering: .relaxed)
        }
    }

    /// Whether a node (or wait) that begins under `parent` on the calling task is its task's entry into the tree,
    /// and so installs the task's cancellation handler: no node around it, or one on another task. A node under a
    /// node of its own task is reached by that node's handler, in the tree's order (one handler per task entry).
    static func isTaskEntry(under parent: (any CancelNode)?, task: UInt) -> Bool {
        guard let parent else { return true }
        return parent.task != task
    }
}

/// One node's membership and cancellation as a value: whether it is live, cancelled or finished, its child nodes and
/// the waits parked on it. Held by its node (``ResourceScope``, ``ResourceOperation``) inside that node's own state,
/// under its lock; tested without I/O (`CancelNodeMachineTests`).
///
/// Rules it keeps: a cancel acts once (the first reason counts) and hands every member out in that step, so each is
/// reached exactly once; a member that arrives after the cancel is refused with the reason (it must not start); a
/// finished node takes no members (an unstructured task that inherited it outlives it, and its waits are reached by
/// their own task only). The phase is an enum with the members beside it, not in its payload: moving the tables in and
/// out of a payload on every park and unpark copies them (Docs/Decisions/0006).
struct CancelNodeMachine: Sendable {
    enum Phase: Sendable, Equatable {
        case live
        case cancelled(CancellationReason)
        case finished
    }

    private(set) var phase: Phase = .live
    private(set) var children = IdentityTable<any CancelNode>()
    private(set) var parked = IdentityTable<any CancellableOperation>()

    init() {}

    /// Members now: child nodes and parked waits (for tests).
    var memberCount: Int { children.count + parked.count }

    /// The reason, once cancelled.
    var cancelReason: CancellationReason? {
        if case .cancelled(let reason) = phase { return reason }
        return nil
    }

    /// What a park decided.
    enum Park: Sendable, Equatable {
        /// Parked: the node's cancel reaches the wait until it unparks.
        case parked
        /// The node was cancelled: the wait must not start; cancel it with the reason.
        case alreadyCancelled(CancellationReason)
        /// The node's body has ended: not tracked (the wait's own task reaches it).
        case notTracked
    }

    mutating func park(_ wait: any CancellableOperation) -> Park {
        switch phase {
        case .live:
            parked.insert(wait)
            return .parked
        case .cancelled(let reason):
            return .alreadyCancelled(reason)
        case .finished:
            return .notTracked
        }
    }

    mutating func unpark(_ wait: any CancellableOperation) {
        parked.remove(wait)
    }

    /// What an attach decided.
    enum Attach: Sendable, Equatable {
        /// A child now: the node's cancel reaches it.
        case attached
        /// The node was cancelled: the child starts cancelled with the reason.
        case cancelled(CancellationReason)
        /// The node's body has ended: the child is a root.
        case notTracked
    }

    mutating func attach(_ child: any CancelNode) -> Attach {
        switch phase {
        case .live:
            children.insert(child, id: ObjectIdentifier(child))
            return .attached
        case .cancelled(let reason):
            return .cancelled(reason)
        case .finished:
            return .notTracked
        }
    }

    mutating func detach(_ child: any CancelNode) {
        children.remove(id: ObjectIdentifier(child))
    }

    /// What a cancel hands out: every child and every parked wait, which have left the machine.
    struct Members: Sendable {
        let children: IdentityTable<any CancelNode>
        let parked: IdentityTable<any CancellableOperation>
    }

    /// The node is cancelled; `nil`: cancelled already (the first reason counts), or finished.
    mutating func cancel(_ reason: CancellationReason) -> Members? {
        guard case .live = phase else { return nil }
        phase = .cancelled(reason)
        let members = Members(children: children, parked: parked)
        children = IdentityTable()
        parked = IdentityTable()
        return members
    }

    /// The node's body ended: it takes no members any more, and forgets those it had.
    mutating func finish() {
        phase = .finished
        if !children.isEmpty { children = IdentityTable() }
        if !parked.isEmpty { parked = IdentityTable() }
    }
}

/// The running task's identity: its address, compared and never dereferenced. Two live nodes with the same identity
/// run on one task (a node is live no longer than the body its task runs); a finished node's identity can be a later
/// task's (the address of a task that ended is reused), so a member that a finished node does not take is its task's
/// entry whatever the identities say (``CancellationLinks``). Read through the C
/// shim (`rk_current_task`), not `withUnsafeCurrentTask`, whose resilient `UnsafeCurrentTask` costs a scope's start
/// more than the rest of the tree does (Docs/Decisions/0006); `TaskIdentityTests` checks that both name the same task.
enum TaskIdentity {
    static var current: UInt { UInt(rk_current_task()) }
}

/// Runs `body` outside the cancel tree, as work that belongs to no scope and no operation of the calling task:
/// background work a resource owns (a reader loop, a cleanup after a cancelled query, a close). Unstructured tasks
/// inherit task-locals, so a `Task { }` started while a request runs would otherwise borrow the request's scope, and
/// the request's deadline would cancel the resource's own work.
///
/// ```swift
/// Task { await withoutResourceScope { await connection.drainLateReply() } }
/// ```
///
/// Cancellation: the calling task's cancellation still reaches `body`; only the scope and the enclosing
/// ``withResourceOperation(boundTo:deadline:onCancel:_:)`` no longer do.
public func withoutResourceScope<Result>(_ body: () async throws -> Result) async rethrows
    -> Result
{
    try await ResourceScope.$current.withValue(nil) {
        try await ResourceOperation.currentLocal.withValue(nil) {
            try await body()
        }
    }
}
