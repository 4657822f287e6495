import Synchronization

/// ResourceKit's record of one registered resource: what an adapter binds its operations to.
///
/// A handle is created by ``ResourceScope/register(_:kind:label:)-(ManagedResource,_,_)`` (closed when the scope ends)
/// or by ``ResourceRegistry/register(_:kind:label:)`` (the caller owns closing it). It knows whether the resource was
/// cancelled and why, the effective deadline of its scope, and every operation currently running on it, so that one
/// ``cancel(_:)`` resumes them all at once.
public final class ResourceHandle: Sendable, CustomStringConvertible {
    /// Where the resource is in its life.
    typealias Phase = HandleStateMachine.Phase

    /// The resource's identity.
    public let id: ResourceID
    /// The resource's kind (policy and counters).
    public let kind: ResourceKind
    /// The adapter's label (never user data).
    public let label: String
    /// The path of the owning scope, such as `"request/db"`; empty when unscoped.
    let scopePath: String
    /// The effective absolute deadline of the owning scope, if any. Adapters pass it on (to a server's
    /// `statement_timeout`, a socket timeout) where that helps; expiry cancels the handle with
    /// ``CancellationReason/deadlineExceeded(_:)``.
    public var deadline: ContinuousClock.Instant? { state.withLock { $0.deadline }.instant }
    /// The deadline that an operation on this resource, run by the current task now, must meet: the earliest of
    /// ``deadline``, the deadlines of every enclosing ``withResourceOperation(boundTo:deadline:onCancel:_:)`` and
    /// the current task's innermost scope's (the borrowing scope's, when it does not own this resource).
    /// Adapters carry it to the other side (a server's `statement_timeout`) so that the work ends there too if
    /// this process can no longer send a cancel.
    public var operationDeadline: ContinuousClock.Instant? {
        Deadlines.earliest(
            state.withLock { $0.deadline }, ResourceOperation.current?.storedDeadline,
            ResourceScope.current?.storedDeadline
        ).instant
    }
    /// The registry that tracks this resource.
    public let registry: ResourceRegistry
    /// When the resource was registered.
    var acquiredAt: ContinuousClock.Instant { storedAcquiredAt.instant }
    let storedAcquiredAt: StoredInstant
    /// The resource object's identity: the registry's key for it, kept after the handle lets the resource go.
    let object: ObjectIdentifier

    /// The resource's state and decisions (``HandleStateMachine``), held inline: see ``InlineStateLock``. Every
    /// method below makes one decision under this lock and acts after it.
    private let state: InlineStateLock<HandleStateMachine>
    /// Whether the resource is a ``SynchronouslyClosedResource`` (``closeInline(timed:)``).
    let closesInline: Bool
    /// Set under the lock when the state lets go of the resource (a close, or a refused duplicate), so that the deinit
    /// of such a handle, the common one, takes no lock: nothing else can reach an object in its deinit, and the
    /// release that started it orders every earlier write before it.
    private let letGo = Atomic<Bool>(false)

    init(
        resource: RegisteredResource,
        kind: ResourceKind,
        label: String,
        scopePath: String,
        deadline: StoredInstant?,
        registry: ResourceRegistry
    ) {
        self.id = .next()
        self.kind = kind
        self.label = label
        self.scopePath = scopePath
        self.registry = registry
        self.storedAcquiredAt = .now
        self.object = ObjectIdentifier(resource.resource)
        self.closesInline = resource.synchronous != nil
        // Built where it is stored: a named local would be copied in (through the type's value witness).
        self.state = InlineStateLock(HandleStateMachine(held: resource, deadline: deadline))
    }

    deinit {
        if letGo.load(ordering: .relaxed) { return }
        // Dropped without close: report it, stop the resource, and close it best-effort so nothing stays open.
        let leaked = state.withLock { $0.abandon() }
        guard let leaked else { return }
        registry.didLeak(self, reason: .deinitializedWithoutClose)
        leaked.cancel()
        registry.closeAbandoned(leaked, timeout: kind.closeTimeout)
    }

    /// A description without user data.
    public var description: String { "ResourceHandle(\(id), kind: \(kind.name), label: \(label))" }

    /// The static facts about this resource.
    public var info: ResourceInfo {
        ResourceInfo(
            id: id, kindName: kind.name, label: label, scopePath: scopePath,
            acquiredAt: acquiredAt, deadline: deadline
        )
    }

    /// The current phase.
    var phase: Phase { state.withLock { $0.phase } }

    /// Why the resource was cancelled, if it was.
    public var cancellationReason: CancellationReason? { state.withLock { $0.cancelReason } }

    /// `true` once the resource was cancelled (level-triggered: it stays cancelled).
    public var isCancelled: Bool { cancellationReason != nil }

    /// Throws the cancellation's error (`CancellationError` or ``DeadlineExceededError``) if the resource was
    /// cancelled or closed, or if its deadline has passed. Adapters call it before starting work.
    public func checkCancellation() throws {
        let (reason, phase, stored) = state.withLock { ($0.cancelReason, $0.phase, $0.deadline) }
        if let reason { throw reason.error }
        if phase != .live { throw CancellationError() }
        if let stored, stored <= .now {
            let deadline = stored.instant
            cancel(.deadlineExceeded(deadline))
            throw DeadlineExceededError(deadline: deadline)
        }
    }

    /// Where a resource built on other resources registers them (composition): a scope that lives exactly as
    /// long as this handle. Its path is this resource's scope path and label, its deadline this resource's.
    ///
    /// - Cancelling this handle (for any reason, the deadline included) cancels the parts with the same reason,
    ///   after this resource's own ``ManagedResource/cancel()``: an outer `cancel()` can still use a part (send
    ///   an "unblock" on a control connection) before the parts are shut down. The parts' blocked operations
    ///   throw the reason's error, so a deadline surfaces as ``DeadlineExceededError`` at every layer.
    /// - Closing this handle closes the parts after this resource's own ``ManagedResource/close()`` (which may
    ///   still use them), last registered first.
    /// - Once this handle is closing or closed, the scope is cancelled: registering into it closes the new
    ///   resource and throws.
    ///
    /// ```swift
    /// let handle = try await registration.register(client, in: scope, kind: kind, label: "queue client")
    /// let data = try await SocketConnection.connect(host: host, port: port, in: handle.parts)
    /// ```
    public var parts: ResourceScope {
        let (scope, reason) = state.withLock { state in
            state.parts(making: { deadline in
                ResourceScope(
                    label: label, parent: nil, deadline: deadline.instant, registry: registry, armsDeadline: false,
                    pathPrefix: scopePath)
            })
        }
        if let reason { scope.cancel(reason) }
        return scope
    }

    /// Publishes an adapter-defined event for this resource (``ResourceEvent/What/adapter(_:)``) to the
    /// registry's event stream and counts it per kind and name (a snapshot's `KindCounters.adapterEvents`,
    /// exported as `resourcekit_adapter_events_total`). `name` must hold no user data (no queries, paths or
    /// credentials) and come from a small fixed set: it is a word such as `postgres.cancel.request`.
    /// Non-blocking, any thread.
    public func report(_ name: String) {
        registry.didReport(self, name)
    }

    /// Cancels the resource: every wait bound to it is marked cancelled, the `onCancel` of every operation running
    /// on it and the adapter's ``ManagedResource/cancel()`` run, then the waits resume at once with the reason's
    /// error (Docs/Architecture.md, "The cancel tree"). Idempotent; a no-op after close. Non-blocking, any thread.
    public func cancel(_ reason: CancellationReason = .cancelled) {
        var pass = CancelPass()
        cancel(reason, in: &pass)
        pass.finish()
    }

    /// Cancels the resource as part of `pass`: its `cancel()` and its operations' hooks now, its waits' resumes
    /// when the pass finishes.
    func cancel(_ reason: CancellationReason, in pass: inout CancelPass) {
        guard let work = state.withLock({ $0.cancel(reason) }) else { return }
        registry.didRequestCancel(self, reason: reason)
        // The operations and waits first (each is marked cancelled: a shutdown in `cancel()` cannot complete one
        // instead), with their operations' hooks before the adapter's `cancel()`; then the parts.
        work.operations.forEach { $0.reach(reason, in: &pass) }
        if let resource = work.resource { pass.stop(resource) }
        work.parts?.reach(reason, in: &pass)
    }

    /// Closes the resource: operations still running on it are cancelled, then ``ManagedResource/close()``
    /// runs exactly once, shielded from the caller's cancellation and bounded by ``ResourceKind/closeTimeout``.
    ///
    /// A second call returns ``CloseOutcome/alreadyClosed`` at once (it does not wait for the first).
    @discardableResult
    public func close() async -> CloseOutcome {
        if let outcome = closeInline(timed: true) { return outcome }
        guard let work = state.withLock({ $0.beginClose() }) else { return .alreadyClosed }
        cancel(work.operations)
        let outcome = await BoundedClose.run(work.resource, timeout: kind.closeTimeout)
        if let parts = work.parts {
            parts.cancel(.cancelled)  // nothing can start on a part any more
            await parts.finish()
        }
        endClose(work.resource, outcome: outcome)
        return outcome
    }

    /// ``close()`` without suspending, for a ``SynchronouslyClosedResource`` with no ``parts``: the common case of
    /// a scope's end, which then needs no async frame per resource (Docs/Architecture.md, "The cost of a scope").
    /// Returns `nil`, having done nothing, when the close needs ``close()``. Untimed (`timed: false`), a close
    /// reports `.closed(.zero)`: for a scope's end when nobody reads the registry's events, the only readers of
    /// the duration.
    func closeInline(timed: Bool) -> CloseOutcome? {
        guard closesInline else { return nil }
        // One lock round trip: the handle is marked closed before the resource's `closeSynchronously()` runs, which
        // nothing can interrupt (a `cancel()` of a closing handle does nothing either way); the registry forgets the
        // resource after the close, as for any close.
        let decision = state.withLock { state in
            let decision = state.closeInline()
            switch decision {
            case .close, .closeCancelling: letGo.store(true, ordering: .relaxed)
            case .notInline, .alreadyClosed: break
            }
            return decision
        }
        let resource: any SynchronouslyClosedResource
        switch consume decision {
        case .notInline: return nil
        case .alreadyClosed: return .alreadyClosed
        case .close(let closing): resource = closing
        case .closeCancelling(let closing, let operations):
            cancel(operations)
            resource = closing
        }
        let outcome = BoundedClose.run(resource, timed: timed)
        // The resource lives until the registry forgot it (see `endClose`).
        withExtendedLifetime(resource) { registry.didClose(self, outcome: outcome) }
        return outcome
    }

    /// Cancels the operations a close took over (they were removed from the handle under its lock).
    private func cancel(_ operations: [any CancellableOperation]) {
        guard !operations.isEmpty else { return }
        registry.operationsChanged(by: -operations.count)
        var pass = CancelPass()
        for operation in operations {
            operation.reach(.cancelled, in: &pass)
        }
        pass.finish()
    }

    private func endClose(_ resource: any ManagedResource, outcome: CloseOutcome) {
        state.withLock { state in
            state.endClose()
            letGo.store(true, ordering: .relaxed)
        }
        // The resource lives until the registry forgot it: its object's address is the registry's key, and a new
        // resource at that address must not be taken for this one.
        withExtendedLifetime(resource) { registry.didClose(self, outcome: outcome) }
    }

    /// Adds a running operation or wait to the resource's set, which the resource's cancel and close reach;
    /// cancels it at once if the resource is already cancelled or closing.
    func track(_ operation: any CancellableOperation) {
        switch state.withLock({ $0.track(operation) }) {
        case .tracked:
            registry.operationsChanged(by: 1)
        case .cancel(let reason):
            operation.cancel(reason)
        }
    }

    /// How many operations and waits the resource's set holds now (for tests).
    var trackedCount: Int { state.withLock { $0.operationCount } }

    /// A wait reached through an operation this handle tracks (``CancellationLinks``) began (`1`) or ended (`-1`):
    /// counted in the registry's operations in flight like a tracked one, without a place in the resource's set.
    func countUntracked(by delta: Int) {
        registry.operationsChanged(by: delta)
    }

    /// The resource moved to an owner without a deadline (adoption): the old scope's deadline no longer
    /// applies. Returns `false` if the handle is no longer live or was cancelled.
    package func detachFromScope() -> Bool {
        state.withLock { $0.detachFromScope() }
    }

    /// Removes an operation that finished.
    func untrack(_ operation: any CancellableOperation) {
        let removed = state.withLock { $0.untrack(operation) }
        if removed { registry.operationsChanged(by: -1) }
    }

    /// The registration was refused (the object is already registered): this handle owns nothing.
    func markRejectedDuplicate() {
        state.withLock { state in
            state.rejectDuplicate()
            letGo.store(true, ordering: .relaxed)
        }
    }

    /// Counts one operation of this resource that ended with `outcome`, in its kind's
    /// `resourcekit_operations_total{kind,outcome}` (Docs/Architecture.md, "What the registry counts"). For an
    /// adapter whose operations do not run in ``withResourceOperation(boundTo:deadline:onCancel:_:)`` (which counts
    /// each one bound to a handle by itself): call it once per operation, when the caller gets its result or error
    /// (``OperationOutcome/init(error:)`` classifies the error). Lock-free, any thread; a closed handle still counts.
    public func recordOperation(_ outcome: OperationOutcome) {
        registry.recordOperation(outcome, registeredKind: kind)
    }

    func recordCancellationLatency(nanoseconds: UInt64) {
        registry.recordCancellationLatency(nanoseconds: nanoseconds, kind: kind)
    }
}

/// How a close ended.
public enum CloseOutcome: Sendable {
    /// `close()` returned, after this long.
    case closed(Duration)
    /// `close()` threw; the resource counts as closed. The error is kept for the caller, never logged.
    case failed(any Error)
    /// `close()` overran the kind's timeout and was abandoned (reported as a leak).
    case timedOut(Duration)
    /// The handle was already closing or closed; nothing was done.
    case alreadyClosed
}
