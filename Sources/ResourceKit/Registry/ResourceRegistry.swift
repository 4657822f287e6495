import Synchronization

/// The plugin table and the ledger of live resources.
///
/// Adapters add their kinds with ``registerKind(_:)``; scopes register resources here. The registry keeps the
/// live resources, per-kind counters, a cancellation-latency histogram per kind, and publishes lifecycle
/// events (``ResourceEvent``). `ResourceKitObservation` reads them: `registry.snapshot()`, `registry.events()`,
/// `registry.eventSink` (Docs/Architecture.md, "Modules"). Tests usually create their own registry (``init()``)
/// so that parallel tests do not see each other's resources, and pass it to
/// ``withResourceScope(_:deadline:registry:isolation:_:)``.
public final class ResourceRegistry: Sendable {
    /// The process-wide registry used when none is given.
    public static let shared = ResourceRegistry()

    private struct State {
        /// By ``ResourceKind/index``: the kinds this registry has seen, and their counters.
        var kinds: [ResourceKind?] = []
        /// `kinds[index] != nil`, kept apart.
        var seen: [Bool] = []
        var counters: [KindTally] = []
        /// By the resource object: one table finds a live resource and refuses a second registration of it.
        var live = LiveTable<ResourceHandle>()

        /// Makes room for `kind` and notes it (the first kind of a name stays, as registered). Returns `true` the
        /// first time.
        @discardableResult
        mutating func see(_ kind: ResourceKind) -> Bool {
            // Checked on a flag: reading `kinds[index]` would copy the kind (its name) on every registration.
            if kind.index < seen.count, seen[kind.index] { return false }
            if kind.index >= kinds.count {
                let missing = kind.index + 1 - kinds.count
                kinds.append(contentsOf: repeatElement(nil, count: missing))
                seen.append(contentsOf: repeatElement(false, count: missing))
                counters.append(contentsOf: repeatElement(KindTally(), count: missing))
            }
            kinds[kind.index] = kind
            seen[kind.index] = true
            return true
        }
    }

    /// Held inline: see ``InlineStateLock`` (two round trips per registered resource).
    private let state = InlineStateLock(State())
    /// Closes of abandoned resources, running until they end (a snapshot's `backgroundCloses`).
    private let closes = OwnedTasks()
    private let broadcast = Broadcast<ResourceEvent>()
    private let liveCounts = Broadcast<Int>()
    /// Operations bound to this registry's resources and running now (``operationCountUpdates()``).
    private let operationsInFlight = Atomic<Int>(0)
    private let operationCounts = Broadcast<Int>()
    private let sink = Locked<EventSinkSlot?>(nil)
    /// Mirrors `sink != nil` (written under the sink's lock): with no sink and no subscriber, events are not
    /// even built.
    private let hasSink = Atomic<Bool>(false)
    /// Each kind's cancellation latencies and operation outcomes, recorded without a lock.
    private let latencies = KindRecorders()

    /// Creates an empty registry.
    public init() {}

    /// The sink the observation module installed: the public sink itself (for its getter) and how to call it.
    package struct EventSinkSlot: Sendable {
        package let sink: any Sendable
        package let receive: @Sendable (ResourceEvent) -> Void

        package init(sink: any Sendable, receive: @escaping @Sendable (ResourceEvent) -> Void) {
            self.sink = sink
            self.receive = receive
        }
    }

    /// The installed sink (`ResourceKitObservation`'s `eventSink`); settable at any time, from any thread.
    package var eventSinkSlot: EventSinkSlot? {
        get { sink.withLock { $0 } }
        set {
            sink.withLock { sink in
                sink = newValue
                hasSink.store(newValue != nil, ordering: .relaxed)
            }
        }
    }

    // MARK: plugin table

    /// Adds (or updates the policy of) a resource kind. Registering a resource of an unknown kind adds the
    /// kind implicitly; an explicit call makes the kind visible in snapshots before its first resource.
    public func registerKind(_ kind: ResourceKind) {
        state.withLock { state in
            if state.see(kind) { latencies.prepare(kind.index) }
            state.kinds[kind.index] = kind
        }
    }

    /// The kind registered under `name`, if any.
    func kind(named name: String) -> ResourceKind? {
        guard let index = KindNames.existingIndex(of: name) else { return nil }
        return state.withLock { $0.kinds.indices.contains(index) ? $0.kinds[index] : nil }
    }

    // MARK: registration

    /// Registers a resource that no scope owns: the caller must call ``ResourceHandle/close()`` (a handle
    /// released without close is reported as leaked and closed best-effort).
    ///
    /// - Throws: ``ResourceKitError/Code/alreadyRegistered`` if this object is already registered and not closed.
    public func register(_ resource: some ManagedResource, kind: ResourceKind, label: String) throws -> ResourceHandle {
        try register(RegisteredResource(resource), kind: kind, label: label, scopePath: "", deadline: nil)
    }

    func register(
        _ resource: RegisteredResource,
        kind: ResourceKind,
        label: String,
        scopePath: String,
        deadline: StoredInstant?
    ) throws -> ResourceHandle {
        let object = ObjectIdentifier(resource.resource)
        let handle = ResourceHandle(
            resource: resource, kind: kind, label: label, scopePath: scopePath, deadline: deadline, registry: self)
        let (duplicate, live) = state.withLock { state -> (Bool, Int) in
            guard state.live.insert(handle, for: object) else { return (true, state.live.count) }
            // The kind's latency recorder is made with the kind's counters, not by the first cancelled wait.
            if state.see(kind) { latencies.prepare(kind.index) }
            state.counters[kind.index].acquired += 1
            return (false, state.live.count)
        }
        liveCounts.yield(live)
        if duplicate {
            handle.markRejectedDuplicate()
            throw ResourceKitError(.alreadyRegistered, "this resource object is already registered and not closed")
        }
        publish(ResourceEvent(resource: handle.info, what: .acquired, at: .now))
        return handle
    }

    // MARK: observation

    /// Number of live (registered, not yet closed) resources.
    public var liveCount: Int { state.withLock { $0.live.count } }

    /// The number of operations bound to this registry's resources (through their handles: reactor waits,
    /// blocking-pool jobs, cancellation cells) and running now: the current one, then every change. The
    /// conformance kit waits on it for "the operation is blocked" instead of sleeping.
    @_spi(Testing) public func operationCountUpdates() -> AsyncStream<Int> {
        operationCounts.subscribe(bufferingNewest: 64) { operationsInFlight.load(ordering: .relaxed) }
    }

    func operationsChanged(by delta: Int) {
        let now = operationsInFlight.add(delta, ordering: .relaxed).newValue
        operationCounts.yield(now)
    }

    /// The number of live resources: the current one, then every change. For tests and tools that wait for
    /// "everything was closed" as an event rather than by polling ``liveCount``.
    @_spi(Testing) public func liveCountUpdates() -> AsyncStream<Int> {
        liveCounts.subscribe(bufferingNewest: 64) { liveCount }
    }

    /// A copy of the current state, for `registry.snapshot()` in `ResourceKitObservation`.
    package func reading() -> RegistryReading {
        let (live, tallies, kinds) = state.withLock { state in
            (
                state.live.reading { RegistryReading.Live(info: $0.info, cancellation: $0.cancellationReason) },
                Dictionary(
                    uniqueKeysWithValues: state.kinds.indices.compactMap { index in
                        state.kinds[index].map { ($0.name, state.counters[index]) }
                    }),
                state.kinds.compactMap { $0 }.sorted { $0.name < $1.name }
            )
        }
        // Read after the lock: they are recorded without it.
        let latencies = Dictionary(uniqueKeysWithValues: kinds.map { ($0.name, self.latencies.reading(at: $0.index)) })
        let operations = Dictionary(
            uniqueKeysWithValues: kinds.map { ($0.name, self.latencies.outcomes(at: $0.index)) })
        return RegistryReading(
            live: live.sorted { $0.info.id < $1.info.id }, tallies: tallies, latencies: latencies,
            operations: operations, kinds: kinds, backgroundCloses: closes.count, takenAt: .now)
    }

    /// Whether anyone reads this registry's events (a subscriber or a sink): else they are not built, and a
    /// scope's end does not time the inline closes whose durations only events carry.
    var publishesEvents: Bool { broadcast.hasSubscribers || hasSink.load(ordering: .relaxed) }

    /// Lifecycle events from now on, for `registry.events()` in `ResourceKitObservation`.
    package func subscribeToEvents(bufferingNewest: Int) -> AsyncStream<ResourceEvent> {
        broadcast.subscribe(bufferingNewest: bufferingNewest)
    }

    // MARK: reports from handles and scopes

    func didRequestCancel(_ handle: ResourceHandle, reason: CancellationReason) {
        state.withLock { state in
            state.see(handle.kind)
            state.counters[handle.kind.index].cancelled += 1
        }
        publish(ResourceEvent(resource: handle.info, what: .cancelRequested(reason), at: .now))
    }

    func didClose(_ handle: ResourceHandle, outcome: CloseOutcome) {
        // The handle registered here, so its kind's counters exist (`see` ran at its registration).
        let index = handle.kind.index
        let live = state.withLock { state -> Int in
            state.live.remove(handle.object, ifMember: handle)
            Self.count(outcome, in: &state.counters[index])
            return state.live.count
        }
        liveCounts.yield(live)
        guard publishesEvents else { return }
        switch outcome {
        case .closed(let d):
            publish(ResourceEvent(resource: handle.info, what: .closed(d), at: .now))
        case .failed(let error):
            publish(
                ResourceEvent(
                    resource: handle.info, what: .closeFailed(errorType: String(describing: type(of: error))), at: .now)
            )
        case .timedOut(let d):
            publish(ResourceEvent(resource: handle.info, what: .closeTimedOut(d), at: .now))
            publish(ResourceEvent(resource: handle.info, what: .leaked(.closeTimedOut), at: .now))
        case .alreadyClosed:
            break
        }
    }

    private static func count(_ outcome: CloseOutcome, in counters: inout KindTally) {
        counters.closed += 1
        switch outcome {
        case .failed: counters.failed += 1
        case .timedOut:
            counters.closeTimedOut += 1
            counters.leaked += 1
            counters.leakedByReason[.closeTimedOut, default: 0] += 1
        case .closed, .alreadyClosed: break
        }
    }

    func didReject(_ handle: ResourceHandle) {
        publish(ResourceEvent(resource: handle.info, what: .rejected, at: .now))
    }

    /// `handle` was dropped without close (its deinit calls this) or its scope ended while another close of it ran.
    func didLeak(_ handle: ResourceHandle, reason: LeakReason) {
        let kind = handle.kind
        let live = state.withLock { state -> Int in
            state.live.remove(handle.object, ifMember: handle)
            state.see(kind)
            state.counters[kind.index].leaked += 1
            state.counters[kind.index].leakedByReason[reason, default: 0] += 1
            return state.live.count
        }
        liveCounts.yield(live)
        publish(ResourceEvent(resource: handle.info, what: .leaked(reason), at: .now))
    }

    /// Work that was cancelled and did not stop within its owner's watchdog: counted as leaked and
    /// reported, but kept live (it is still running and still holds what it holds).
    package func didNotStop(_ handle: ResourceHandle) {
        state.withLock { state in
            state.see(handle.kind)
            state.counters[handle.kind.index].leaked += 1
            state.counters[handle.kind.index].leakedByReason[.didNotStopAfterCancel, default: 0] += 1
        }
        publish(ResourceEvent(resource: handle.info, what: .leaked(.didNotStopAfterCancel), at: .now))
    }

    func didReport(_ handle: ResourceHandle, _ name: String) {
        state.withLock { state in
            state.see(handle.kind)
            state.counters[handle.kind.index].adapterEvents[name, default: 0] += 1
        }
        publish(ResourceEvent(resource: handle.info, what: .adapter(name), at: .now))
    }

    /// Closes a resource whose handle was dropped without `close()`: inline if it closes synchronously, else
    /// on a task this registry owns (counted in a snapshot's `backgroundCloses` until it ends), shielded
    /// and bounded by `timeout` as any close.
    func closeAbandoned(_ resource: any ManagedResource, timeout: Duration) {
        if let immediate = resource as? any SynchronouslyClosedResource {
            try? immediate.closeSynchronously()  // the leak was reported; a close error adds nothing
            return
        }
        closes.start { _ = await BoundedClose.run(resource, timeout: timeout) }
    }

    /// Counts one operation of a resource of `kind` that ended with `outcome`, in `resourcekit_operations_total`:
    /// for an adapter whose operations do not run in ``withResourceOperation(boundTo:deadline:onCancel:_:)`` and
    /// that has no handle at hand (a statement a pool runs on a connection of its choosing). Lock-free; any thread.
    public func recordOperation(_ outcome: OperationOutcome, kind: ResourceKind) {
        if !latencies.isPrepared(kind.index) {
            // A kind this registry has not seen yet: into the kinds table, so that a snapshot shows it.
            state.withLock { state in
                if state.see(kind) { latencies.prepare(kind.index) }
            }
        }
        latencies.record(outcome, index: kind.index)
    }

    /// Counts one operation of a registered resource (its kind seen at registration). Lock-free.
    func recordOperation(_ outcome: OperationOutcome, registeredKind kind: ResourceKind) {
        latencies.record(outcome, index: kind.index)
    }

    /// Records one cancelled wait's latency for `kind` (a kind this registry saw: its handle's). Lock-free.
    func recordCancellationLatency(nanoseconds: UInt64, kind: ResourceKind) {
        latencies.record(nanoseconds: nanoseconds, index: kind.index)
    }

    private func publish(_ make: @autoclosure () -> ResourceEvent) {
        guard publishesEvents else { return }
        let event = make()
        broadcast.yield(event)
        // Called with no registry lock held: a sink may take its own locks, log, or count.
        sink.withLock { $0 }?.receive(event)
    }
}
