/// A registered resource's state and decisions as a value: whether it is live, closing or closed, why it was
/// cancelled, which operations run on it and its parts scope. ``ResourceHandle`` holds it under its lock
/// (``InlineStateLock``), calls one method per event, and performs what comes back after releasing the lock: it
/// cancels operations, calls the adapter's `cancel()` and `close()`, tells the registry. Tested without I/O
/// (`HandleStateMachineTests`).
///
/// Rules it keeps: a cancel acts once, and only on a live resource (a closing one is being torn down already); an
/// operation tracked on a cancelled or closing resource is cancelled at once instead; every operation a close takes
/// over leaves the machine in that step, so it is cancelled exactly once; the resource is let go exactly once,
/// whichever way (a close, an inline close, a refused duplicate, a handle dropped without close).
struct HandleStateMachine {
    /// Where the resource is in its life.
    enum Phase: Sendable, Hashable {
        case live
        case closing
        case closed
    }

    /// The resource until it is let go (``RegisteredResource``: held once, whichever way it closes).
    private(set) var held: RegisteredResource?
    private(set) var phase: Phase = .live
    private(set) var cancelReason: CancellationReason?
    private(set) var operations = IdentityTable<any CancellableOperation>()
    /// Kept in a fixed-layout form (see ``StoredInstant``), like every instant a handle stores.
    private(set) var deadline: StoredInstant?
    private(set) var parts: ResourceScope?

    // No explicit `init`: the memberwise one (`HandleStateMachine(held:deadline:)`) builds the value where the
    // handle stores it, inside its lock; an `init` of its own made the optimizer build it aside and copy it in
    // (an outlined copy and destroy per registered resource, in release builds).

    /// The resource, while it is held.
    var resource: (any ManagedResource)? { held?.resource }
    /// Operations running on the resource (for tests).
    var operationCount: Int { operations.count }

    // MARK: Cancel

    /// What a cancel does, after the lock: cancel every operation with the reason, then the resource, then the
    /// parts.
    struct CancelWork {
        let operations: IdentityTable<any CancellableOperation>
        let resource: (any ManagedResource)?
        let parts: ResourceScope?
    }

    /// The resource is cancelled; `nil`: nothing to do (not live, or cancelled already: the first reason counts).
    mutating func cancel(_ reason: CancellationReason) -> CancelWork? {
        guard phase == .live, cancelReason == nil else { return nil }
        cancelReason = reason
        return CancelWork(operations: operations, resource: resource, parts: parts)
    }

    // MARK: Operations

    enum TrackDecision {
        /// Tracked: the resource's cancel and close reach it.
        case tracked
        /// Not tracked: cancel the operation at once with this reason (the resource is cancelled or closing).
        case cancel(CancellationReason)
    }

    /// An operation or a wait starts on the resource.
    mutating func track(_ operation: any CancellableOperation) -> TrackDecision {
        if let cancelReason { return .cancel(cancelReason) }
        guard phase == .live else { return .cancel(.cancelled) }
        operations.insert(operation)
        return .tracked
    }

    /// An operation ended; `false` if it was not tracked (a close took it over).
    mutating func untrack(_ operation: any CancellableOperation) -> Bool {
        operations.remove(operation)
    }

    // MARK: Parts

    /// The parts scope: the existing one, or one made now with `make` (given the deadline); `cancelWith` is the
    /// reason to cancel a new one with at once (the resource is cancelled, closing or closed).
    mutating func parts(
        making make: (StoredInstant?) -> ResourceScope
    ) -> (scope: ResourceScope, cancelWith: CancellationReason?) {
        if let parts { return (parts, nil) }
        let made = make(deadline)
        parts = made
        return (made, cancelReason ?? (phase == .live ? nil : .cancelled))
    }

    // MARK: Close

    /// What ``beginClose()`` hands over: the operations to cancel (they have left the machine), the resource to
    /// close, the parts to close after it.
    struct CloseWork {
        let operations: [any CancellableOperation]
        let resource: any ManagedResource
        let parts: ResourceScope?
    }

    /// An asynchronous close starts; `nil`: the resource is closing or closed already.
    @inline(__always)  // on every scope's end: decided inside the handle's lock closure, no call
    mutating func beginClose() -> CloseWork? {
        guard phase == .live, let resource else { return nil }
        phase = .closing
        let taken = operations.isEmpty ? [] : operations.all
        operations = IdentityTable()
        return CloseWork(operations: taken, resource: resource, parts: parts)
    }

    /// The asynchronous close ended: the resource is let go.
    mutating func endClose() {
        phase = .closed
        held = nil
    }

    /// What ``closeInline()`` decided.
    enum InlineClose {
        /// The resource needs the asynchronous close (not synchronously closed, or it has parts).
        case notInline
        case alreadyClosed
        /// Close it now.
        case close(any SynchronouslyClosedResource)
        /// Cancel these operations (they have left the machine), then close it now.
        case closeCancelling(any SynchronouslyClosedResource, [any CancellableOperation])
    }

    /// A close without suspending, for a synchronously closed resource without parts: marked closed, and the
    /// resource let go, in this one step (a cancel of a closing handle does nothing either way).
    @inline(__always)  // on every scope's end: decided inside the handle's lock closure, no call
    mutating func closeInline() -> InlineClose {
        guard phase == .live, held != nil else { return .alreadyClosed }
        guard parts == nil, case .synchronous? = held else { return .notInline }
        // Moved out, not copied (the check above leaves nothing else for `take()` to find).
        guard case .synchronous(let resource)? = held.take() else { return .notInline }
        phase = .closed
        guard !operations.isEmpty else { return .close(resource) }
        defer { operations = IdentityTable() }
        return .closeCancelling(resource, operations.all)
    }

    // MARK: Ownership

    /// The resource moved to an owner without a deadline (adoption); `false` if it is no longer live or was
    /// cancelled.
    mutating func detachFromScope() -> Bool {
        guard phase == .live, cancelReason == nil else { return false }
        deadline = nil
        return true
    }

    /// The registration was refused (the object is registered already): the handle owns nothing.
    mutating func rejectDuplicate() {
        phase = .closed
        held = nil
    }

    /// The handle is dropped without a close: the resource to stop and close best-effort, if it was still live.
    mutating func abandon() -> (any ManagedResource)? {
        guard phase == .live else { return nil }
        phase = .closed
        return held.take()?.resource
    }
}

extension HandleStateMachine: Sendable {}
