/// The reactor's life as a value: whether its loop runs, sleeps or is gone, where a job of a task that prefers it
/// as its executor goes, and when the loop must be woken. ``IOReactor`` holds it beside its ``ReadinessTable``
/// under one lock. Tested without threads (`ReactorLifecycleTests`); generic over the job so that a test can
/// stand a value in for an `UnownedJob`.
///
/// One exception to "act after the lock", documented where it is made: the owner signals the loop's eventfd
/// *under* the lock when an action says to wake it, because the loop closes the eventfd only after it saw the
/// reactor stop under that lock (so a signal never reaches a closed, possibly reused, descriptor).
struct ReactorLifecycle<Job> {
    enum State: Equatable {
        /// The loop runs. `sleeping`: it found no job and is (about to be) blocked in `epoll_wait`; the next job
        /// must wake it.
        case running(sleeping: Bool)
        /// ``shutdown()`` ran and the loop has not exited yet: no wait is accepted; jobs still queue, and go to the
        /// global concurrent executor when the loop exits.
        case stopping
        /// The loop is gone, or never ran (the reactor is unavailable): jobs run elsewhere, waits fail.
        case stopped
    }

    private(set) var state: State
    /// Jobs queued for the loop's next turn.
    private(set) var jobs: [Job] = []

    /// A reactor whose loop starts now, or (`available: false`) one that could not be started.
    init(available: Bool) {
        state = available ? .running(sleeping: false) : .stopped
    }

    /// Whether a new wait may be registered.
    var acceptsWaits: Bool {
        if case .running = state { return true }
        return false
    }

    enum EnqueueAction: Equatable {
        /// Queued; the loop runs it on its next turn.
        case queued
        /// Queued; signal the loop's eventfd (under the lock) to wake it.
        case queuedWakeLoop
        /// The loop is gone: run the job on the global concurrent executor, so that its task never hangs.
        case runElsewhere
    }

    /// A job of a task that prefers the reactor as its executor.
    mutating func enqueue(_ job: Job) -> EnqueueAction {
        switch state {
        case .stopped:
            return .runElsewhere
        case .stopping:
            jobs.append(job)
            return .queued
        case .running(let sleeping):
            jobs.append(job)
            guard sleeping else { return .queued }
            state = .running(sleeping: false)
            return .queuedWakeLoop
        }
    }

    enum TurnAction: Equatable {
        /// Run the jobs taken into the batch, then look for events without blocking (the jobs may queue more).
        case runJobs
        /// No job: block in `epoll_wait` until an event or a wake (the next ``enqueue(_:)`` wakes the loop).
        case sleep
        /// The reactor stops: leave the loop, then report ``loopExited()``.
        case exit
    }

    /// The loop, between two waits for events: takes the queued jobs into `batch` (an empty array it reuses).
    mutating func loopTurn(taking batch: inout [Job]) -> TurnAction {
        guard case .running = state else { return .exit }
        if jobs.isEmpty {
            state = .running(sleeping: true)
            return .sleep
        }
        swap(&batch, &jobs)
        return .runJobs
    }

    /// The loop returned from `epoll_wait`: a job queued from now on needs no wake.
    mutating func loopAwake() {
        if case .running(true) = state { state = .running(sleeping: false) }
    }

    /// Stops the reactor. Returns `true` the first time: wake the loop (under the lock) and fail every waiter; `false`
    /// when it was stopping or stopped already.
    mutating func shutdown() -> Bool {
        guard case .running = state else { return false }
        state = .stopping
        return true
    }

    /// The loop exited: returns the jobs still queued, to run on the global concurrent executor.
    mutating func loopExited() -> [Job] {
        state = .stopped
        defer { jobs = [] }
        return jobs
    }
}

extension ReactorLifecycle: Sendable where Job: Sendable {}
