public import ResourceKit

/// One piece of work run by a ``ResourceOwner``: observable (progress, outcome) by any number of requests,
/// which come and go without affecting it.
public final class OwnedWork<Value: Sendable>: Sendable {
    /// The key the work was started under (deduplication).
    public let key: String

    private struct State: Sendable {
        var progress: Double?
        var outcome: Outcome<Value>?
        var task: Task<Void, Never>?
        var cancelRequested = false
    }

    private let state = Locked(State())
    private let broadcast = Broadcast<Double>()
    let finished = OneShotEvent()

    init(key: String) {
        self.key = key
    }

    /// The last progress reported by the work (by convention 0...1), if any.
    public var progress: Double? { state.withLock { $0.progress } }

    /// The outcome, once the work has ended.
    public var currentOutcome: Outcome<Value>? { state.withLock { $0.outcome } }

    /// `true` once the work has ended.
    public var isFinished: Bool { finished.isSet }

    /// Waits for the work to end and returns how it ended.
    ///
    /// Cancellation: cancelling the *observer* throws `CancellationError` from this call at once; the work
    /// keeps running (it belongs to the owner, not to the request that watches it).
    public func outcome() async throws -> Outcome<Value> {
        try await finished.wait()
        return state.withLock { $0.outcome } ?? .cancelled
    }

    /// Progress reports from now on; the stream finishes when the work ends.
    public func progressUpdates() -> AsyncStream<Double> {
        broadcast.subscribe(bufferingNewest: 16)
    }

    /// Cancels this work only: its scope's resources are torn down at once. Idempotent, any thread.
    public func cancel() {
        let task = state.withLock { state -> Task<Void, Never>? in
            state.cancelRequested = true
            return state.task
        }
        task?.cancel()
    }

    /// Records the work's task (created after the owner's lock was released); cancels it at once if
    /// ``cancel()`` came first.
    func attach(_ task: Task<Void, Never>) {
        let cancelNow = state.withLock { state -> Bool in
            guard state.outcome == nil else { return false }
            state.task = task
            return state.cancelRequested
        }
        if cancelNow { task.cancel() }
    }

    func report(_ progress: Double) {
        let open = state.withLock { state -> Bool in
            guard state.outcome == nil else { return false }
            state.progress = progress
            return true
        }
        if open { broadcast.yield(progress) }
    }

    func finish(_ outcome: Outcome<Value>) {
        state.withLock { state in
            state.outcome = outcome
            state.task = nil
        }
        broadcast.finish()
        finished.set()
    }
}

/// What owned work is given: its scope (register resources here; they live as long as the work) and a way
/// to report progress.
public struct OwnedWorkContext: Sendable {
    /// The key the work runs under.
    public let key: String
    /// The work's own scope, a root scope: a request that started or observes the work does not own it.
    public let scope: ResourceScope
    private let reporter: @Sendable (Double) -> Void
    private let shutdownBegan: OneShotEvent

    init(
        key: String, scope: ResourceScope, shutdownBegan: OneShotEvent,
        reporter: @escaping @Sendable (Double) -> Void
    ) {
        self.key = key
        self.scope = scope
        self.shutdownBegan = shutdownBegan
        self.reporter = reporter
    }

    /// Whether the owner's ``ResourceOwner/shutdown()`` began: its grace period runs, and the work is cancelled when
    /// it ends. Work that can end early at a good point (a checkpoint written, a batch handed back) may do so now.
    public var shutdownHasBegun: Bool { shutdownBegan.isSet }

    /// Returns once the owner's ``ResourceOwner/shutdown()`` began (at once if it has).
    ///
    /// Cancellation: throws `CancellationError` when the work is cancelled first (its task, or the end of the
    /// grace period), and `DeadlineExceededError` when the work's scope has a deadline that passes first.
    public func waitUntilShutdownBegins() async throws {
        try await shutdownBegan.wait()
    }

    /// Publishes progress (by convention 0...1) to every observer.
    public func report(progress: Double) {
        reporter(progress)
    }
}

/// The registry's view of one piece of owned work: cancel cancels its task; close waits until it ended.
final class OwnedWorkResource: ManagedResource {
    private let cancelWork: @Sendable () -> Void
    private let finished: OneShotEvent

    init(finished: OneShotEvent, cancel: @escaping @Sendable () -> Void) {
        self.finished = finished
        self.cancelWork = cancel
    }

    func cancel() { cancelWork() }

    func close() async throws {
        try await finished.wait()
    }
}
