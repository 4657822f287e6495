import ResourceKit

/// One interruptible blocking call as a value: when may the call run, when may its interrupt be delivered, and
/// whose error is a failure that follows a cancel. The driver (`BlockingPool.runInterruptible`) holds it under a
/// lock; it makes no call itself and is tested without threads (`InterruptibleCallStateMachineTests`).
///
/// The rules (Docs/Architecture.md, "Blocking calls"):
/// - a call whose cancel came before a thread picked it up never runs;
/// - the interrupt is delivered only while *that* call runs (between pickup and return), never after it
///   returned, so it cannot reach the next call on the same library handle;
/// - a cancel that lands between pickup and the library's own start (where a library such as SQLite clears a
///   pending interrupt) is delivered again, with backoff, until the call returns.
struct InterruptibleCallStateMachine: Sendable, Equatable {
    enum State: Sendable, Equatable {
        /// Queued: no thread has it yet.
        case queued
        /// Cancelled while queued: it will never run.
        case skipped(CancellationReason)
        /// A thread is inside the call.
        case running
        /// Cancelled while running: the interrupt was delivered, and is delivered again until the call returns.
        case interrupting(CancellationReason, deliveries: Int)
        /// The call returned; `interruptedBy` says whether a cancel reached it while it ran.
        case returned(interruptedBy: CancellationReason?)
    }

    private(set) var state: State = .queued

    enum CancelAction: Sendable, Equatable {
        /// Deliver the interrupt now (under the driver's lock) and schedule a redelivery.
        case interrupt
        /// Nothing to deliver: queued (the call is skipped at pickup), already interrupting, or returned.
        case none
    }

    /// A cancel request (the task, the handle, the scope, a deadline).
    mutating func cancel(_ reason: CancellationReason) -> CancelAction {
        switch state {
        case .queued:
            state = .skipped(reason)
            return .none
        case .running:
            state = .interrupting(reason, deliveries: 1)
            return .interrupt
        case .skipped, .interrupting, .returned:
            return .none
        }
    }

    enum PickUpAction: Sendable, Equatable {
        /// Run the call.
        case run
        /// Do not: it was cancelled first.
        case skip
    }

    /// A pool thread took the call.
    mutating func pickUp() -> PickUpAction {
        switch state {
        case .queued:
            state = .running
            return .run
        case .skipped:
            return .skip
        case .running, .interrupting, .returned:
            preconditionFailure("an interruptible call was picked up twice")
        }
    }

    /// The redelivery timer fired: whether to deliver the interrupt again (the call has not returned yet).
    mutating func redeliveryDue() -> Bool {
        guard case .interrupting(let reason, let deliveries) = state else { return false }
        state = .interrupting(reason, deliveries: deliveries + 1)
        return true
    }

    /// How long until the next redelivery, after `deliveries` deliveries: 1 ms, doubling, at most 64 ms.
    static func redeliveryDelay(after deliveries: Int) -> Duration {
        .milliseconds(1 << min(max(deliveries - 1, 0), 6))
    }

    /// The call returned. Returns the cancel that reached it while it ran, if any: a failure of the call is
    /// then that cancel's error.
    mutating func callReturned() -> CancellationReason? {
        switch state {
        case .running:
            state = .returned(interruptedBy: nil)
            return nil
        case .interrupting(let reason, _):
            state = .returned(interruptedBy: reason)
            return reason
        case .queued, .skipped, .returned:
            preconditionFailure("an interruptible call returned without running")
        }
    }

    /// The number of deliveries so far (for the adapter's report and the tests).
    var deliveries: Int {
        if case .interrupting(_, let deliveries) = state { return deliveries }
        return 0
    }
}
