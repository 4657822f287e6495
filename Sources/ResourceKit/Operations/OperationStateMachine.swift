/// The life of one operation run by ``withResourceOperation(boundTo:deadline:onCancel:_:)``, as a value: every
/// event returns what to do, and nothing here performs I/O or calls back, so it is tested without threads.
///
/// An operation is *pending* until its body starts, *running* while it runs, then *finished*. It is a node of the
/// cancel tree (``CancelNodeMachine``): what its body runs (waits, nested operations and scopes) are its members. A
/// cancel records the first reason only. While pending it just records it (the body will not start; the adapter's
/// hook has nothing to stop); while running it hands out every member and asks the caller to run the hook; after
/// the end it does nothing.
struct OperationStateMachine: Sendable {
    enum Phase: Equatable {
        case pending
        case running
        case finished
    }

    private(set) var phase: Phase = .pending
    private(set) var reason: CancellationReason?
    /// The operation as a node of the cancel tree.
    private(set) var node = CancelNodeMachine()

    enum StartAction: Equatable, Sendable {
        /// Run the body.
        case run
        /// Cancelled before the body started: throw the reason's error, run nothing.
        case refuse(CancellationReason)
    }

    mutating func start() -> StartAction {
        precondition(phase == .pending, "an operation starts once")
        if let reason {
            phase = .finished
            node.finish()
            return .refuse(reason)
        }
        phase = .running
        return .run
    }

    enum CancelAction: Sendable {
        case none
        /// Run the adapter's hook with `reason`, and reach `members` (the body's waits and nested nodes) with it.
        case stop(CancellationReason, members: CancelNodeMachine.Members)
    }

    mutating func cancel(_ reason: CancellationReason) -> CancelAction {
        guard self.reason == nil, phase != .finished else { return .none }
        self.reason = reason
        let members = node.cancel(reason)
        guard phase == .running, let members else { return .none }
        return .stop(reason, members: members)
    }

    /// A wait of the body parks on the operation; see ``CancelNodeMachine/park(_:)``.
    mutating func park(_ wait: any CancellableOperation) -> CancelNodeMachine.Park {
        node.park(wait)
    }

    mutating func unpark(_ wait: any CancellableOperation) {
        node.unpark(wait)
    }

    /// A scope or an operation begins in the body; see ``CancelNodeMachine/attach(_:)``.
    mutating func attach(_ child: any CancelNode) -> CancelNodeMachine.Attach {
        node.attach(child)
    }

    mutating func detach(_ child: any CancelNode) {
        node.detach(child)
    }

    /// The body ended; returns the cancellation's reason if a cancel won before that.
    mutating func finish() -> CancellationReason? {
        phase = .finished
        node.finish()
        return reason
    }
}
