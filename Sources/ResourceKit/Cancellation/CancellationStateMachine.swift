/// The race-free core of one cancellable suspension, as a pure value.
///
/// It answers one question for every event: *who resumes the waiter, and does the adapter's cancel hook have
/// to run?* A cancel may arrive before the operation started, while it is being started, while it runs, or
/// after it completed; it may arrive twice, or from several threads at once (the driver serialises events
/// with a lock). The first claimant resumes the waiter, the loser gets `.none`.
///
/// The driver (``CancellationCell``) holds this value under a lock and performs the returned actions *after*
/// releasing the lock, so a continuation is never resumed while a lock that `onCancel` also takes is held.
///
/// `Waiter` is the continuation type; tests use plain integers.
struct CancellationStateMachine<Waiter> {
    @usableFromInline
    enum State {
        /// Nothing happened yet.
        case idle
        /// Cancelled before the operation was started: it must never start.
        case cancelledBeforeStart(CancellationReason)
        /// The waiter is suspended and the start closure is running.
        case starting(Waiter)
        /// Cancelled while starting: once the start closure returns, the hook runs (so that it sees whatever
        /// the start registered) and then the waiter is resumed.
        case startingCancelled(Waiter, CancellationReason)
        /// Completed while starting: the waiter was resumed with the result.
        case startingCompleted
        /// Started; waiting for completion or cancellation.
        case running(Waiter)
        /// The operation's result arrived before anyone waited for it: the driver keeps it, and the waiter gets it
        /// when it suspends (the start closure is never called).
        case completedBeforeStart
        /// The waiter was resumed and every obligation is done.
        case finished(CancellationReason?)
    }

    @usableFromInline
    var state: State = .idle

    /// Creates a machine in its initial state.
    init() {}

    /// What the driver does when the waiter suspends.
    enum SuspendAction {
        /// Call the start closure, then report ``startReturned()``.
        case start
        /// Resume the waiter with the reason's error at once; never start the operation.
        case resumeCancelled(Waiter, CancellationReason)
        /// Resume the waiter with the result the driver kept; never start the operation.
        case resumeWithKeptResult(Waiter)
    }

    /// What the driver does after a cancel request.
    enum CancelAction {
        /// Nothing now: already cancelled, already completed, not started yet (the start will see it), or
        /// starting (``startReturned()`` finishes the cancel).
        case none
        /// Run the adapter's cancel hook, then resume the waiter with the reason's error. In that order: when
        /// a cancelled wait throws, its hook has already run (a pool's waiter has left the queue, a reactor's
        /// registration is gone), so the caller never observes a half-cancelled operation.
        case runHookThenResume(Waiter, CancellationReason)
    }

    /// What the driver does when the operation delivers a result.
    enum CompleteAction {
        /// The result lost the race (cancelled first, or delivered twice): drop it.
        case none
        /// Resume the waiter with the result.
        case resume(Waiter)
        /// Nobody waits yet: keep the result for the waiter that will suspend.
        case keep
    }

    /// What the driver does once the start closure returned.
    enum StartReturnedAction {
        case none
        /// A cancel arrived while starting: run the hook now that the start is complete, then resume the
        /// waiter with the reason's error.
        case runHookThenResume(Waiter, CancellationReason)
    }

    /// The waiter suspends.
    mutating func suspend(_ waiter: Waiter) -> SuspendAction {
        switch state {
        case .idle:
            state = .starting(waiter)
            return .start
        case .cancelledBeforeStart(let reason):
            state = .finished(reason)
            return .resumeCancelled(waiter, reason)
        case .completedBeforeStart:
            state = .finished(nil)
            return .resumeWithKeptResult(waiter)
        case .starting, .startingCancelled, .startingCompleted, .running, .finished:
            preconditionFailure("CancellationStateMachine: suspend called twice (a cell runs at most once)")
        }
    }

    /// The start closure returned.
    mutating func startReturned() -> StartReturnedAction {
        switch state {
        case .starting(let waiter):
            state = .running(waiter)
            return .none
        case .startingCancelled(let waiter, let reason):
            state = .finished(reason)
            return .runHookThenResume(waiter, reason)
        case .startingCompleted:
            state = .finished(nil)
            return .none
        case .idle, .cancelledBeforeStart, .completedBeforeStart, .running, .finished:
            preconditionFailure("CancellationStateMachine: startReturned without start")
        }
    }

    /// The operation's `start` runs now (a cancel is only noted then: ``startReturned()`` finishes it).
    var isStarting: Bool {
        if case .starting = state { return true }
        return false
    }

    /// A cancel request. Idempotent: only the first one that finds a live waiter acts.
    mutating func cancel(_ reason: CancellationReason) -> CancelAction {
        switch state {
        case .idle:
            state = .cancelledBeforeStart(reason)
            return .none
        case .starting(let waiter):
            state = .startingCancelled(waiter, reason)
            return .none
        case .running(let waiter):
            state = .finished(reason)
            return .runHookThenResume(waiter, reason)
        case .cancelledBeforeStart, .startingCancelled, .startingCompleted, .completedBeforeStart, .finished:
            return .none
        }
    }

    /// The operation delivered its result.
    mutating func complete() -> CompleteAction {
        switch state {
        case .starting(let waiter):
            state = .startingCompleted
            return .resume(waiter)
        case .running(let waiter):
            state = .finished(nil)
            return .resume(waiter)
        case .idle:
            // Before anyone waits (a callback that fired before `run`): the waiter gets it when it suspends.
            state = .completedBeforeStart
            return .keep
        case .cancelledBeforeStart, .startingCancelled, .startingCompleted, .completedBeforeStart, .finished:
            return .none
        }
    }

    /// The reason this operation was cancelled, if a cancel won the race.
    var cancellationReason: CancellationReason? {
        switch state {
        case .cancelledBeforeStart(let reason), .startingCancelled(_, let reason):
            return reason
        case .finished(let reason):
            return reason
        case .idle, .starting, .startingCompleted, .completedBeforeStart, .running:
            return nil
        }
    }

    /// `true` once the waiter was resumed (or can no longer be).
    var isResolved: Bool {
        switch state {
        case .idle, .starting, .running:
            return false
        case .cancelledBeforeStart, .startingCancelled, .startingCompleted, .completedBeforeStart, .finished:
            return true
        }
    }
}

extension CancellationStateMachine: Sendable where Waiter: Sendable {}
extension CancellationStateMachine.State: Sendable where Waiter: Sendable {}
