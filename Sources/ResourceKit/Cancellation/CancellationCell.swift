/// Runs one operation so that a cancel arriving before its start, during it, or after its completion is
/// handled exactly once.
///
/// An adapter creates the cell *before* it suspends (so an `onCancel` that fires first can already name it),
/// then calls ``run(boundTo:deadline:shielded:onCancel:afterCancel:start:)``. Inside `start` it kicks off the real work
/// (a reactor registration, a blocking-pool job, a network send) and arranges for ``complete(_:)`` to be
/// called when the work finishes.
///
/// Cancellation behaviour:
/// - cancelled before `run`: `start` is never called, `run` throws at once (nothing is sent);
/// - cancelled while `start` runs: the waiter resumes immediately; `onCancel` runs right after `start` returns;
/// - cancelled while running: the waiter resumes immediately with the reason's error and `onCancel` runs on the
///   canceller's thread (it must be short and non-blocking);
/// - cancelled after completion: nothing happens, the result is returned.
/// A result delivered after a cancel won the race is dropped. A result delivered before `run` (a callback that
/// fired first) is kept: `run` returns it without calling `start`.
public final class CancellationCell<Success: Sendable>: CancellableOperation {
    /// The waiter's result is type-erased (`any Sendable`, cast back at the end of the wait)
    /// so that the state machine, its lock and its actions are one concrete type compiled in this module: a
    /// module above (the reactor's `CancellationCell<IOEvents>`) would otherwise run them as unspecialised
    /// generic code, through value witnesses, on every wait and every cancel.
    ///
    /// The continuation: see ``CancellationWaiter``.
    @usableFromInline typealias Waiter = CancellationWaiter
    private typealias Machine = CancellationStateMachine<Waiter>

    /// The cell's state, behind a lock held inline: see ``InlineStateLock``.
    private let inner = InlineStateLock(CancellationCellState())

    /// Creates a cell for one operation. A cell runs at most once.
    public init() {}

    /// `true` once a cancel request won the race against completion.
    public var isCancelled: Bool {
        inner.withLock { $0.machine.cancellationReason != nil }
    }

    /// The reason, if a cancel request won the race against completion.
    public var cancellationReason: CancellationReason? {
        inner.withLock { $0.machine.cancellationReason }
    }

    /// `true` once the waiter was resumed or can no longer be (completed or cancelled).
    package var isResolved: Bool {
        inner.withLock { $0.machine.isResolved }
    }

    /// Cancels the operation. Synchronous, non-blocking and idempotent; callable from any thread, before,
    /// during or after the operation. Only the first effective call acts.
    public func cancel(_ reason: CancellationReason = .cancelled) {
        let (action, hooks, _) = decideCancel(reason)
        if case .runHookThenResume(let waiter, let reason) = action {
            Self.runHooks(hooks, resuming: waiter, with: reason)
        }
    }

    /// A cancel that won alone (not in a pass): the adapter's hook, the waiter's resume, then `afterCancel`, on the
    /// cancelling thread (``CancelPass/finish()`` keeps the same order for the waits a pass reached).
    private static func runHooks(
        _ hooks: CancellationHooks, resuming waiter: CancellationWaiter, with reason: CancellationReason
    ) {
        hooks.before?(reason)
        waiter.resume(throwing: reason.error)
        hooks.after?(reason)
    }

    /// One member of a cancel that reaches several waits: the hooks and the resume are left to `pass`, which runs
    /// every wait's `onCancel` before it resumes any (Docs/Architecture.md, "The cancel tree").
    @usableFromInline
    package func reach(_ reason: CancellationReason, in pass: inout CancelPass) {
        let (action, hooks, held) = decideCancel(reason, inPass: true)
        if case .runHookThenResume(let waiter, let reason) = action {
            pass.resume(waiter, hooks: hooks, reason: reason)
        } else if held {
            pass.hold(self)
        }
    }

    /// `inPass`: a pass that reaches the cell while its `start` runs holds it, so that the hooks and the resume
    /// `start`'s return would run wait for the pass's stop hooks (``passFinished()``).
    private func decideCancel(
        _ reason: CancellationReason, inPass: Bool = false
    ) -> (Machine.CancelAction, CancellationHooks, held: Bool) {
        inner.withLock { inner in
            let starting = inner.machine.isStarting
            let action = inner.machine.cancel(reason)
            if inner.recordsLatency, inner.cancelRequestedAt == nil, inner.machine.cancellationReason != nil {
                inner.cancelRequestedAt = StoredInstant.nanosecondsNow
            }
            let held = inPass && starting && inner.machine.cancellationReason != nil
            if held { inner.passesHolding += 1 }
            return (action, inner.hooks, held)
        }
    }

    /// Delivers the operation's result. Returns `false` when the result lost the race (the operation was
    /// cancelled first, or a result was already delivered); the caller then owns any cleanup of the value.
    // Inlinable, and erased at the call site: `deliver` then needs no metadata of `Result<Success, _>` at run
    // time (no generic-metadata lookup per wait; Docs/Decisions/0006).
    @inlinable
    @discardableResult
    public func complete(_ result: Result<Success, any Error>) -> Bool {
        deliver(result.map { $0 as any Sendable })
    }

    /// Delivers a value; see ``complete(_:)``.
    @inlinable
    @discardableResult
    public func succeed(_ value: Success) -> Bool { deliver(.success(value)) }

    /// Delivers an error; see ``complete(_:)``.
    @inlinable
    @discardableResult
    public func fail(_ error: any Error) -> Bool { deliver(.failure(error)) }

    @usableFromInline
    func deliver(_ result: Result<any Sendable, any Error>) -> Bool {
        let action = inner.withLock { inner -> Machine.CompleteAction in
            let action = inner.machine.complete()
            if case .keep = action { inner.kept = result }
            return action
        }
        switch action {
        case .none:
            return false
        case .keep:
            return true
        case .resume(let waiter):
            waiter.resume(with: result)
            return true
        }
    }

    // Inlinable: the shell is specialised where it is called (the reactor's `CancellationCell<IOEvents>` in
    // ResourceKitIO), so the wait pays no unspecialised generic code; everything it calls is concrete and lives
    // here (`enter`, `begin`, `cancel`, `recordLatency`, `CancellationLinks.leave`).
    /// Suspends until the operation completes or is cancelled.
    ///
    /// - Parameters:
    ///   - handle: ties the operation to a registered resource: cancelling the resource (or its scope, or the
    ///     scope's deadline) cancels the operation. A handle that is already cancelled cancels it before start.
    ///     Unless `shielded`, the calling task's innermost scope reaches the wait too when it does not own the
    ///     resource (the borrowing scope; see ``ResourceScope``).
    ///   - deadline: an extra absolute deadline for this operation alone; on expiry it throws
    ///     ``DeadlineExceededError``. Scope deadlines reach the operation through `handle` and need no timer.
    ///   - shielded: when `true`, cancelling the *calling task* (or the enclosing
    ///     ``withResourceOperation(boundTo:deadline:onCancel:_:)``, or the task's scopes) does not cancel the
    ///     operation (used for bounded cleanup); the handle and the deadline still do.
    ///   - onCancel: the adapter's hook, run once if a cancel wins while the operation is started. It runs on
    ///     the canceller's thread, *before* the waiter resumes, and after every other stop hook the same cancel
    ///     reaches (the enclosing operations' `onCancel`, the resource's `cancel()`; Docs/Architecture.md, "One
    ///     hook order"): when a cancelled wait throws, its hook has run. Short, non-blocking, and it must not take
    ///     a lock held while completing.
    ///   - afterCancel: runs once, on the same thread, right *after* the waiter resumed, when `onCancel` ran:
    ///     work that must start from inside the cancel but should not delay the waiter's return (a cancel
    ///     request to a server). The same rules as `onCancel`.
    ///   - start: starts the operation; called at most once, never after a cancel that arrived first.
    /// - Throws: `CancellationError`, ``DeadlineExceededError``, or whatever the operation failed with.
    @inlinable
    public func run(
        boundTo handle: ResourceHandle? = nil,
        deadline: ContinuousClock.Instant? = nil,
        shielded: Bool = false,
        onCancel: (@Sendable (CancellationReason) -> Void)? = nil,
        afterCancel: (@Sendable (CancellationReason) -> Void)? = nil,
        start: (CancellationCell<Success>) -> Void
    ) async throws -> Success {
        let links = enter(
            boundTo: handle, deadline: deadline, shielded: shielded, onCancel: onCancel, afterCancel: afterCancel)
        defer { links.leave(self, handle: handle) }
        do {
            let value: any Sendable
            // One task-cancellation handler per task entry into the tree: a wait parked on a node of its own task is
            // reached by that node's handler, in the tree's order; a shielded wait by none (Docs/Architecture.md,
            // "The cancel tree").
            if links.isTaskEntry {
                value = try await withTaskCancellationHandler {
                    try await suspend(start)
                } onCancel: {
                    self.cancel(.cancelled)
                }
            } else {
                value = try await suspend(start)
            }
            // Only `complete(_:)` resumes with a value, and it takes a `Success`.
            return value as! Success
        } catch {
            recordLatency(handle: handle)
            throw error
        }
    }

    /// Suspends the caller on a ``CancellationWaiter`` handed to ``begin(_:start:)``.
    @inlinable
    func suspend(_ start: (CancellationCell<Success>) -> Void) async throws -> any Sendable {
        try await suspendOnWaiter { begin($0) { start(self) } }
    }

    /// Before the wait suspends: the hooks, then where the wait stands (``CancellationLinks``): parked on its task's
    /// innermost node, in its resource's set, its deadline armed; each of them may cancel the cell at once.
    @usableFromInline
    func enter(
        boundTo handle: ResourceHandle?,
        deadline: ContinuousClock.Instant?,
        shielded: Bool,
        onCancel: (@Sendable (CancellationReason) -> Void)?,
        afterCancel: (@Sendable (CancellationReason) -> Void)? = nil
    ) -> CancellationLinks {
        if onCancel != nil || afterCancel != nil || handle != nil {
            inner.withLock { inner in
                inner.hooks = CancellationHooks(before: onCancel, after: afterCancel)
                inner.recordsLatency = handle != nil
            }
        }
        guard !shielded else {
            return CancellationLinks.link(wait: self, handle: handle, node: nil, deadline: deadline, isTaskEntry: false)
        }
        let node = CancelTree.current
        return CancellationLinks.link(
            wait: self, handle: handle, node: node, deadline: deadline,
            isTaskEntry: CancelTree.isTaskEntry(under: node, task: node == nil ? 0 : TaskIdentity.current))
    }

    /// The waiter suspended: start the operation, resume at once (a cancel or a result came first), or finish a
    /// cancel that arrived while `start` ran.
    @usableFromInline
    func begin(_ continuation: Waiter, start: () -> Void) {
        let (action, kept) = inner.withLock { inner -> (Machine.SuspendAction, Result<any Sendable, any Error>?) in
            let action = inner.machine.suspend(continuation)
            guard case .resumeWithKeptResult = action else { return (action, nil) }
            defer { inner.kept = nil }
            return (action, inner.kept)
        }
        switch action {
        case .resumeCancelled(let waiter, let reason):
            waiter.resume(throwing: reason.error)
        case .resumeWithKeptResult(let waiter):
            waiter.resume(with: kept ?? .failure(CancellationError()))
        case .start:
            start()
            let (after, hooks) = inner.withLock { inner -> (Machine.StartReturnedAction?, CancellationHooks) in
                let after = inner.machine.startReturned()
                // A pass that reached the cell while `start` ran runs its hooks and resume after its own stop hooks
                // (Docs/Architecture.md, "The cancel tree").
                if case .runHookThenResume(let waiter, let reason) = after, inner.passesHolding > 0 {
                    inner.deferred = CancelPass.Resume(hooks: inner.hooks, waiter: waiter, reason: reason)
                    return (nil, inner.hooks)
                }
                return (after, inner.hooks)
            }
            if case .runHookThenResume(let waiter, let reason)? = after {
                Self.runHooks(hooks, resuming: waiter, with: reason)
            }
        }
    }

    @usableFromInline
    func recordLatency(handle: ResourceHandle?) {
        guard let handle else { return }
        let requested = inner.withLock { $0.cancelRequestedAt }
        if let requested {
            handle.recordCancellationLatency(nanoseconds: StoredInstant.nanosecondsNow &- requested)
        }
    }
}

extension CancellationCell: HeldByPass {
    func passFinished() -> CancelPass.Resume? {
        inner.withLock { inner in
            inner.passesHolding -= 1
            guard inner.passesHolding == 0, let deferred = inner.deferred else { return nil }
            inner.deferred = nil
            return deferred
        }
    }
}

/// The continuation a cell's waiter suspends on: see ``WaiterContinuation``.
@usableFromInline typealias CancellationWaiter = WaiterContinuation<any Sendable>

/// What a cancel that wins against a started operation runs, in this order, on the cancelling thread: the
/// adapter's hook (`run`'s `onCancel`), the waiter's resume, then `run`'s `afterCancel`. Plain data: the cell
/// (a cancel that won alone) and ``CancelPass`` (the waits a pass reached) run them.
struct CancellationHooks {
    var before: (@Sendable (CancellationReason) -> Void)?
    var after: (@Sendable (CancellationReason) -> Void)?
}

/// A cell's state under its lock. Not nested in the generic cell: a nested type's metadata depends on `Success`
/// and is looked up at run time (a hash lookup on every cell made, locked and freed); this one is static.
struct CancellationCellState {
    var machine = CancellationStateMachine<CancellationWaiter>()
    var hooks = CancellationHooks()
    /// When the cancel that won was requested (``StoredInstant/nanosecondsNow``).
    var cancelRequestedAt: UInt64?
    /// Bound to a handle: the cancel-to-resume latency is recorded in its registry.
    var recordsLatency = false
    /// A result delivered before `run` suspended (the machine says when the waiter takes it).
    var kept: Result<any Sendable, any Error>?
    /// Passes that reached the cell while its `start` ran and have not finished (``CancelPass/hold(_:)``).
    var passesHolding = 0
    /// The hooks and resume a `start` that returned while a pass held the cell left to that pass.
    var deferred: CancelPass.Resume?
}
