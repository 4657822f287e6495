public import ResourceKit

/// Latest-wins work keyed by an id: SwiftUI's `.task(id:)` for code without views.
///
/// ``update(id:)`` with a new id (compared with `==`) cancels the running work, whose resources are torn down
/// at once by its scope, and starts work for the new id; the same id again restarts nothing. With a
/// `debounce`, work starts only after the id has been stable that long, so a burst of ids reaches the
/// resource once. Each run's result is committed to ``output`` only if it is still the latest generation, so
/// superseded work that ignores cancellation and returns late can never overwrite a newer result.
///
/// Bind it to the scope that should own it (usually the connection's or the service's, not a short
/// request's): ``start(in:_:debounce:work:)`` registers it there, so it is cancelled and closed with that
/// scope. Work runs in its own child scope; register resources in the scope it is given.
///
/// ```swift
/// let search = try await LatestTask.start(
///     in: connectionScope, "search", debounce: .milliseconds(300)
/// ) { term, scope in
///     try await pool.withConnection { try await $0.query("SELECT ... WHERE name LIKE $1", ["%" + term + "%"]) }
/// }
/// for await line in client.lines { search.update(id: line) }   // only the latest term reaches Postgres
/// ```
///
/// Do not derive the id from the output (the server analogue of a view whose `.task(id:)` changes its own
/// id): every commit would restart the work. An ``update(id:)`` issued from inside the task's own work is
/// refused with ``UpdateResult/refusedFeedbackLoop``.
public final class LatestTask<ID: Equatable & Sendable, Output: Sendable>: ManagedResource {
    /// The work for one id. It runs in a fresh scope (a child of the owner's), cancelled when a newer id
    /// arrives or the task is cancelled.
    public typealias Work = @Sendable (ID, ResourceScope) async throws -> Output

    /// What ``update(id:)`` did.
    public enum UpdateResult: Sendable, Hashable {
        /// Work for the new id was started (after the debounce, if any), as this generation.
        case started(generation: UInt64)
        /// The id equals the current one; nothing restarted.
        case unchanged
        /// The task was cancelled or closed.
        case refusedClosed
        /// Called from the task's own work: the output feeds the id. Nothing restarted.
        case refusedFeedbackLoop
    }

    /// Counters for observability and tests.
    public struct Stats: Sendable, Hashable {
        /// Runs started (ids accepted).
        public var started = 0
        /// Runs cancelled because a newer id arrived or the task was cancelled, after their work began.
        public var cancelled = 0
        /// Runs superseded while still debouncing: their work never began.
        public var debouncedAway = 0
        /// Results committed to ``LatestTask/output``.
        public var committed = 0
        /// Results that arrived after a newer generation began and were dropped.
        public var droppedStale = 0
        /// Runs whose work failed.
        public var failed = 0
        /// Updates refused as a feedback loop.
        public var feedbackLoops = 0
    }

    /// The resource kind under which a scoped latest task is registered.
    public static var kind: ResourceKind { ResourceKind(name: "resourcekit.latest-task", closeTimeout: .seconds(30)) }

    /// The task's label (no user data).
    public let label: String
    /// How long an id must stay unchanged before its work starts; `nil` starts at once.
    public let debounce: Duration?
    /// The latest committed result.
    public let output: LatestValue<Output>

    private let work: Work
    private let registry: ResourceRegistry?
    private weak let parentScope: ResourceScope?

    /// A run's task as the driver knows it: the task is created after the lock that decided to start it
    /// is released, so a run may finish (or be superseded) before its task is recorded.
    private enum Run: Sendable {
        case starting
        case started(Task<Void, Never>)
    }

    private struct State: Sendable {
        var machine = LatestTaskStateMachine<ID>()
        var tasks: [UInt64: Run] = [:]
        var stats = Stats()
        var idleWaiters: [OneShotEvent] = []
    }

    private let state = Locked(State())

    /// Creates an unscoped latest task: call ``close()`` when done (or use ``start(in:_:debounce:work:)``).
    public convenience init(
        _ label: String, debounce: Duration? = nil, registry: ResourceRegistry? = nil, work: @escaping Work
    ) {
        self.init(label: label, debounce: debounce, registry: registry, parentScope: nil, work: work)
    }

    private init(
        label: String, debounce: Duration?, registry: ResourceRegistry?, parentScope: ResourceScope?,
        work: @escaping Work
    ) {
        self.label = label
        self.debounce = debounce
        self.registry = registry
        self.parentScope = parentScope
        self.work = work
        self.output = LatestValue()
    }

    /// Creates a latest task owned by `scope`: it is cancelled when the scope is cancelled and closed (its
    /// running work awaited) when the scope ends. Each run's scope is a child of `scope`.
    ///
    /// Cancellation: if `scope` is already cancelled, throws like `ResourceScope.register(_:kind:label:)`.
    public static func start(
        in scope: ResourceScope,
        _ label: String,
        debounce: Duration? = nil,
        work: @escaping Work
    ) async throws -> LatestTask {
        let task = LatestTask(
            label: label, debounce: debounce, registry: scope.registry, parentScope: scope, work: work)
        try await scope.register(task, kind: kind, label: label)
        return task
    }

    /// The id of the latest accepted update.
    public var currentID: ID? { state.withLock { $0.machine.current?.id } }

    /// A snapshot of the counters.
    public var stats: Stats { state.withLock { $0.stats } }

    /// Number of runs whose work has not ended yet (superseded runs that are still unwinding count).
    public var runningCount: Int { state.withLock { $0.tasks.count } }

    /// Waits until no run is in progress (none debouncing, running or unwinding): the latest result, if
    /// any, is then in ``output``. Returns at once when idle.
    ///
    /// Cancellation: throws `CancellationError` when the waiting task is cancelled; the runs are unaffected.
    public func idle() async throws {
        try await idleSignal()?.wait()
    }

    /// A one-shot event set when no run is left, or `nil` when none is running now.
    private func idleSignal() -> OneShotEvent? {
        state.withLock { state -> OneShotEvent? in
            guard !state.tasks.isEmpty else { return nil }
            let event = OneShotEvent()
            state.idleWaiters.append(event)
            return event
        }
    }

    /// Moves the task to `id`: a new id cancels the running work (its resources torn down at once) and starts
    /// work for `id`; the same id does nothing. Non-blocking, any thread.
    @discardableResult
    public func update(id: ID) -> UpdateResult {
        let fromOwnWork = LatestTaskMarker.current == ObjectIdentifier(self)
        // Decide under the lock...
        let decision = state.withLock { state -> (UpdateResult, superseded: Run?) in
            switch state.machine.update(id: id, fromOwnWork: fromOwnWork) {
            case .unchanged:
                return (.unchanged, nil)
            case .refuseClosed:
                return (.refusedClosed, nil)
            case .refuseFeedbackLoop:
                state.stats.feedbackLoops += 1
                return (.refusedFeedbackLoop, nil)
            case .start(let generation, let superseding):
                state.stats.started += 1
                state.tasks[generation] = .starting
                return (.started(generation: generation), superseding.flatMap { state.tasks[$0] })
            }
        }
        // ...act after it: take the ticket, start the task, record it, cancel the superseded run.
        guard case .started(let generation) = decision.0 else { return decision.0 }
        let ticket = output.begin(atLeast: generation)
        let task = makeRun(id: id, generation: generation, ticket: ticket)
        let cancelNow = state.withLock { state -> Bool in
            guard case .starting = state.tasks[generation] else { return false }  // already finished
            state.tasks[generation] = .started(task)
            // Superseded or closed while it was being started: its cancel found no task to cancel.
            return state.machine.isClosed || state.machine.current?.generation != generation
        }
        if cancelNow { task.cancel() }
        if case .started(let superseded) = decision.superseded { superseded.cancel() }
        return decision.0
    }

    /// Cancels the running work and refuses further ids. Idempotent, non-blocking, any thread.
    public func cancel() {
        let runs = state.withLock { state in state.machine.close().compactMap { state.tasks[$0] } }
        for case .started(let task) in runs { task.cancel() }
    }

    /// Cancels, then waits until every run (including superseded ones still unwinding) has ended.
    public func close() async {
        cancel()
        try? await idleSignal()?.wait(shielded: true)
    }

    private func makeRun(id: ID, generation: UInt64, ticket: LatestValue<Output>.Ticket) -> Task<Void, Never> {
        let marker = ObjectIdentifier(self)
        let parent = parentScope
        // Owner: this LatestTask (`state.tasks`; `close()` waits until every run ended).
        return Task {
            var began = false
            let outcome = await LatestTaskMarker.$current.withValue(marker) {
                await ResourceScope.$current.withValue(parent) {
                    await withOutcome {
                        if let debounce {
                            try await Task.sleep(for: debounce)
                        }
                        began = true
                        return try await withResourceScope(label, registry: registry) { scope in
                            try await work(id, scope)
                        }
                    }
                }
            }
            finish(generation: generation, ticket: ticket, outcome: outcome, began: began)
        }
    }

    private func finish(generation: UInt64, ticket: LatestValue<Output>.Ticket, outcome: Outcome<Output>, began: Bool) {
        let committed = outcome.value.map { output.commit($0, for: ticket) }
        let idle = state.withLock { state -> [OneShotEvent] in
            _ = state.machine.workFinished(generation: generation)
            state.tasks[generation] = nil
            defer { if state.tasks.isEmpty { state.idleWaiters = [] } }
            switch outcome {
            case .completed:
                if committed == true { state.stats.committed += 1 } else { state.stats.droppedStale += 1 }
            case .cancelled, .deadlineExceeded:
                if began { state.stats.cancelled += 1 } else { state.stats.debouncedAway += 1 }
            case .failed:
                state.stats.failed += 1
            }
            return state.tasks.isEmpty ? state.idleWaiters : []
        }
        for event in idle { event.set() }
    }
}

/// Marks the tasks that run a ``LatestTask``'s work, so that an update from inside the work is recognised.
enum LatestTaskMarker {
    @TaskLocal static var current: ObjectIdentifier?
}
