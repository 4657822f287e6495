public import ResourceKit

/// A long-lived owner for work that must outlive the request that started it (an upload, a sync), and for
/// resources adopted from request scopes.
///
/// Hand work to it with ``run(key:_:)`` instead of a detached `Task {}`: work is deduplicated by key, can be
/// observed (progress, outcome) by any request, and is stopped by ``shutdown()`` in two stages: a grace
/// period in which work may finish, then cancellation, whose teardown is immediate (each work's scope
/// cancels its resources), then a watchdog that reports whatever still did not stop, as a registry event
/// (`LeakReason.didNotStopAfterCancel`) and as ``OwnerShutdownReport/error``.
///
/// ```swift
/// let uploads = ResourceOwner("uploads", gracePeriod: .seconds(10), watchdog: .seconds(2))
/// // in a request handler:
/// let upload = try uploads.run(key: "upload-\(id)") { work in
///     let file = try await FileReader.open(path: path, in: work.scope)
///     ... work.report(progress: sent / total) ...
/// }
/// respond(.accepted)                     // the request ends; the upload keeps going
/// // at process shutdown:
/// let report = await uploads.shutdown()
/// ```
public final class ResourceOwner: Sendable {
    /// The owner's label (no user data).
    public let label: String
    /// How long ``shutdown()`` lets running work finish before cancelling it.
    public let gracePeriod: Duration
    /// How long ``shutdown()`` waits for cancelled work to stop before reporting it.
    public let watchdog: Duration
    /// The registry that records the owner's work and adopted resources.
    public let registry: ResourceRegistry

    private enum Phase: Sendable { case open, shuttingDown, shutDown }

    private struct Entry: Sendable {
        /// `nil` while the work is being started (registered and its task created outside the lock).
        var handle: ResourceHandle?
        var work: any Sendable
        var finished: OneShotEvent
        var cancel: @Sendable () -> Void
    }

    private struct State: Sendable {
        var phase: Phase = .open
        var works: [String: Entry] = [:]
        var adopted: [ResourceHandle] = []
        var report: OwnerShutdownReport?
    }

    private let state = Locked(State())
    private let shutdownDone = OneShotEvent()
    /// Set once ``shutdown()`` has taken the running work it will report on: work that finishes after this is
    /// in the report's ``OwnerShutdownReport/finishedInGrace`` (or later stages); before it, in no list.
    let shutdownStarted = OneShotEvent()
    private let kind: ResourceKind

    /// Creates an owner.
    public init(
        _ label: String, gracePeriod: Duration = .seconds(10), watchdog: Duration = .seconds(5),
        registry: ResourceRegistry = .shared
    ) {
        self.label = label
        self.gracePeriod = gracePeriod
        self.watchdog = watchdog
        self.registry = registry
        self.kind = ResourceKind(name: "resourcekit.owned-work", closeTimeout: watchdog)
    }

    /// Keys of the work currently running.
    public var runningKeys: [String] { state.withLock { $0.works.keys.sorted() } }

    /// Number of resources adopted and not yet closed.
    public var adoptedCount: Int { state.withLock { $0.adopted.count } }

    /// Runs `work` under `key`, unless work with that key is already running, in which case that work is
    /// returned and nothing new starts. Returns at once; the work runs on its own task.
    ///
    /// Cancellation: the caller's cancellation does not reach the work (the owner owns it). The work is
    /// cancelled by ``OwnedWork/cancel()`` or by ``shutdown()``.
    /// - Throws: `ResourceKitError.Code.ownerShutDown` after ``shutdown()`` began;
    ///   `ResourceKitError.Code.keyInUse` if `key` runs work with another result type.
    public func run<Value: Sendable>(
        key: String,
        _ work: @escaping @Sendable (OwnedWorkContext) async throws -> Value
    ) throws -> OwnedWork<Value> {
        // Decide under the lock: claim the key...
        let owned = OwnedWork<Value>(key: key)
        let existing = try state.withLock { state -> OwnedWork<Value>? in
            guard state.phase == .open else {
                throw ResourceKitError(.ownerShutDown, "the owner is shutting down and takes no more work")
            }
            if let existing = state.works[key] {
                guard let same = existing.work as? OwnedWork<Value> else {
                    throw ResourceKitError(.keyInUse, "work with this key is running with another result type")
                }
                return same
            }
            state.works[key] = Entry(handle: nil, work: owned, finished: owned.finished) { [weak owned] in
                owned?.cancel()
            }
            return nil
        }
        if let existing { return existing }
        // ...act after it: register (which publishes an event), then start the task.
        let resource = OwnedWorkResource(finished: owned.finished) { [weak owned] in owned?.cancel() }
        let handle: ResourceHandle
        do {
            handle = try registry.register(resource, kind: kind, label: label)
        } catch {
            state.withLock { state in
                if state.works[key]?.work as? OwnedWork<Value> === owned { state.works[key] = nil }
            }
            owned.finish(.failed(error))
            throw error
        }
        state.withLock { state in
            if state.works[key]?.work as? OwnedWork<Value> === owned { state.works[key]?.handle = handle }
        }
        owned.attach(start(owned, handle: handle, work: work))
        return owned
    }

    private func start<Value: Sendable>(
        _ owned: OwnedWork<Value>,
        handle: ResourceHandle,
        work: @escaping @Sendable (OwnedWorkContext) async throws -> Value
    ) -> Task<Void, Never> {
        let (label, registry, key) = (self.label, self.registry, owned.key)
        // Owner: this ResourceOwner (its `works` entry, awaited by `shutdown()`), not the caller's scope.
        return Task {
            let outcome = await withoutResourceScope {
                await withOutcome {
                    try await withResourceScope(label, registry: registry) { scope in
                        try await work(
                            OwnedWorkContext(key: key, scope: scope, shutdownBegan: shutdownStarted) {
                                [weak owned] in owned?.report($0)
                            })
                    }
                }
            }
            owned.finish(outcome)
            await self.workEnded(key: key, handle: handle)
        }
    }

    private func workEnded(key: String, handle: ResourceHandle) async {
        state.withLock { state in
            if state.works[key]?.handle === handle { state.works[key] = nil }
        }
        // The work has finished, so this close (of a resource whose close waits for that) returns at once.
        await handle.close()
    }

    /// Moves `handle` out of `scope` into this owner: it is not closed when `scope` ends, and is closed
    /// (last adopted first) when the owner shuts down, after the owner's work has stopped.
    ///
    /// Cancellation: a resource that was already cancelled cannot be adopted (throws its cancellation
    /// error); after adoption, the request scope's cancellation and deadline no longer reach it.
    /// - Throws: `ResourceKitError.Code.notInScope` if `handle` is not a live resource of `scope`;
    ///   `ResourceKitError.Code.ownerShutDown` if the owner is shutting down (the resource stays in `scope`).
    public func adopt(_ handle: ResourceHandle, from scope: ResourceScope) throws {
        try handle.checkCancellation()
        try state.withLock { state in
            guard state.phase == .open else {
                throw ResourceKitError(.ownerShutDown, "the owner is shutting down and adopts nothing")
            }
            guard scope.release(handle) else {
                throw ResourceKitError(.notInScope, "the handle is not a live resource of that scope")
            }
            _ = handle.detachFromScope()
            state.adopted.append(handle)
        }
    }

    /// Stops the owner: no new work; running work gets ``gracePeriod`` to finish; what remains is cancelled
    /// (its resources torn down at once); what has not stopped ``watchdog`` later is reported. Adopted
    /// resources are then closed, last adopted first. A second call waits for the first and returns its
    /// report.
    ///
    /// Cancellation: cancelling the caller skips the rest of the grace period (work is cancelled at once);
    /// the watchdog stage and the closing of adopted resources still run.
    @discardableResult
    public func shutdown() async -> OwnerShutdownReport {
        let started = ContinuousClock.now
        let entries = state.withLock { state -> [String: Entry]? in
            guard state.phase == .open else { return nil }
            state.phase = .shuttingDown
            return state.works
        }
        shutdownStarted.set()
        guard let entries else {
            // A second call waits for the first, whatever happens to this caller.
            try? await shutdownDone.wait(shielded: true)
            return state.withLock { $0.report } ?? OwnerShutdownReport(label: label)
        }

        let graceEnds = started + gracePeriod
        for entry in entries.values {
            try? await entry.finished.wait(deadline: graceEnds)
        }
        let remaining = entries.filter { !$0.value.finished.isSet }
        for entry in remaining.values {
            entry.cancel()
        }
        // The watchdog stage runs even when the caller is cancelled (it only waits, bounded).
        let watchdogEnds = ContinuousClock.now + watchdog
        for entry in remaining.values {
            try? await entry.finished.wait(deadline: watchdogEnds, shielded: true)
        }
        let stuck = remaining.filter { !$0.value.finished.isSet }
        let stuckHandles = state.withLock { state in stuck.keys.compactMap { state.works[$0]?.handle } }
        for handle in stuckHandles {
            registry.didNotStop(handle)
        }

        let adopted = state.withLock { state in
            defer { state.adopted = [] }
            return state.adopted
        }
        for handle in adopted.reversed() {
            await handle.close()
        }

        let report = OwnerShutdownReport(
            label: label,
            finishedInGrace: entries.keys.filter { remaining[$0] == nil }.sorted(),
            cancelled: remaining.keys.filter { stuck[$0] == nil }.sorted(),
            stuck: stuck.keys.sorted(),
            adoptedClosed: adopted.count,
            elapsed: ContinuousClock.now - started
        )
        state.withLock { state in
            state.phase = .shutDown
            state.report = report
        }
        shutdownDone.set()
        return report
    }
}

/// What a ``ResourceOwner/shutdown()`` did.
public struct OwnerShutdownReport: Sendable, Hashable {
    /// The owner's label.
    public var label: String
    /// Keys of work that finished within the grace period.
    public var finishedInGrace: [String] = []
    /// Keys of work that was cancelled and stopped within the watchdog.
    public var cancelled: [String] = []
    /// Keys of work that ignored cancellation and was still running when the watchdog expired.
    public var stuck: [String] = []
    /// Adopted resources that were closed.
    public var adoptedClosed = 0
    /// How long the shutdown took.
    public var elapsed: Duration = .zero

    /// `ResourceKitError.Code.shutdownIncomplete` when some work did not stop, else `nil`. Its message
    /// gives the count, never the keys (they may hold user data); the keys are in ``stuck``.
    public var error: ResourceKitError? {
        guard !stuck.isEmpty else { return nil }
        return ResourceKitError(
            .shutdownIncomplete,
            "\(stuck.count) piece(s) of owned work ignored cancellation and were still running after the watchdog")
    }

    /// Throws ``error`` if there is one.
    public func check() throws {
        if let error { throw error }
    }
}

/// Owners that shut down together, in reverse order of creation (the owner created last, which may use the
/// earlier ones, stops first).
public final class ResourceOwnerGroup: Sendable {
    private let owners = Locked<[ResourceOwner]>([])
    private let registry: ResourceRegistry

    /// Creates an empty group whose owners record into `registry`.
    public init(registry: ResourceRegistry = .shared) {
        self.registry = registry
    }

    /// Creates an owner that belongs to this group.
    public func makeOwner(_ label: String, gracePeriod: Duration = .seconds(10), watchdog: Duration = .seconds(5))
        -> ResourceOwner
    {
        let owner = ResourceOwner(label, gracePeriod: gracePeriod, watchdog: watchdog, registry: registry)
        owners.withLock { $0.append(owner) }
        return owner
    }

    /// Shuts every owner down, the last created first; returns their reports in that order.
    ///
    /// Cancellation: as ``ResourceOwner/shutdown()`` for each owner.
    public func shutdown() async -> [OwnerShutdownReport] {
        let all = owners.withLock { $0 }
        var reports: [OwnerShutdownReport] = []
        for owner in all.reversed() {
            reports.append(await owner.shutdown())
        }
        return reports
    }
}
