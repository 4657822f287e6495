/// The life of one operation run by ``withResourceOperation(boundTo:deadline:onCancel:_:)``, as a value: every
/// event returns what to do, and nothing here performs I/O or calls back, so it is tested without threads.
///
/// An operation is *pending* until its body starts, *running* while it runs, then *finished*. A cancel records
/// the first reason only. While pending it just records it (the body will not start; the adapter's hook has
/// nothing to stop); while running it asks the caller to run the hook and to cancel every waiter the body
/// started (reactor waits, pool jobs, nested operations); after the end it does nothing.
struct OperationStateMachine<Waiter: Sendable>: Sendable {
    enum Phase: Equatable {
        case pending
        case running
        case finished
    }

    private(set) var phase: Phase = .pending
    private(set) var reason: CancellationReason?
    private var waiters = IdentityTable<Waiter>()

    /// Number of waiters currently tracked (for tests).
    var waiterCount: Int { waiters.count }

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
            return .refuse(reason)
        }
        phase = .running
        return .run
    }

    enum CancelAction: Sendable {
        case none
        /// Run the adapter's hook with `reason`, and cancel `waiters` with it.
        case stop(CancellationReason, waiters: [Waiter])
    }

    mutating func cancel(_ reason: CancellationReason) -> CancelAction {
        guard self.reason == nil, phase != .finished else { return .none }
        self.reason = reason
        guard phase == .running else { return .none }
        let stopped = waiters.all
        waiters = IdentityTable()
        return .stop(reason, waiters: stopped)
    }

    enum AddAction: Sendable {
        /// Tracked: a later cancel reaches it.
        case tracked
        /// The operation was cancelled already: cancel the waiter now with this reason.
        case cancelNow(CancellationReason)
        /// The operation is over (a waiter outliving its body, such as an unstructured task): not tracked.
        case ignored
    }

    mutating func add(_ waiter: Waiter, id: ObjectIdentifier) -> AddAction {
        if phase == .finished { return .ignored }
        if let reason { return .cancelNow(reason) }
        waiters.insert(waiter, id: id)
        return .tracked
    }

    mutating func remove(id: ObjectIdentifier) {
        waiters.remove(id: id)
    }

    /// The body ended; returns the cancellation's reason if a cancel won before that.
    mutating func finish() -> CancellationReason? {
        phase = .finished
        waiters = IdentityTable()
        return reason
    }
}
