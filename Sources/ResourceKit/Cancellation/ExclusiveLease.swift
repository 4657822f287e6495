/// One user at a time: a lease taken in arrival order, whose wait is cancellable and can be bound to a resource.
///
/// Adapters use it for a connection that serves one operation at a time and that something else may still hold
/// after an operation returned (the drain of a cancelled operation's late reply): the next operation waits for
/// the lease instead of finding the connection busy. Waiters park in the same queue as a pool's queued leases
/// (Docs/Architecture.md, "State machines and their owners").
///
/// ```swift
/// let lease = ExclusiveLease()
/// try await lease.acquire(boundTo: handle)
/// defer { lease.release() }
/// // use the connection
/// ```
public final class ExclusiveLease: Sendable {
    /// Waiters are ``CancellationCell``s, whose `onCancel` runs only after `start` returned (after they parked), so
    /// a cancel always finds them asked. A release hands the lease to the first waiter whose cell takes it; a
    /// waiter whose cancel won meanwhile refuses it, and the lease goes on to the next.
    private struct State: Sendable {
        var held = false
        var waiters = WaiterQueue<CancellationCell<Void>>()
    }

    private let state = Locked(State())

    /// Creates a lease that nobody holds.
    public init() {}

    /// `true` while someone holds the lease.
    public var isHeld: Bool { state.withLock { $0.held } }

    /// Takes the lease, waiting in arrival order while someone else holds it. The caller must ``release()`` it.
    ///
    /// Cancellation: a free lease is taken at once, whatever the task's state (check cancellation yourself before
    /// the work the lease guards). A parked wait throws `CancellationError` when the task is cancelled and
    /// ``DeadlineExceededError`` when `deadline` passes; with `handle`, a cancel of that resource, of its scope or
    /// the scope's deadline ends it too, with its reason, and the wait counts as one of the handle's running
    /// operations. A wait that throws does not hold the lease.
    public func acquire(boundTo handle: ResourceHandle? = nil, deadline: ContinuousClock.Instant? = nil) async throws {
        let free = state.withLock { state -> Bool in
            guard !state.held, state.waiters.isEmpty else { return false }
            state.held = true
            return true
        }
        if free { return }
        let cell = CancellationCell<Void>()
        let id = WaiterQueue<CancellationCell<Void>>.ID(UInt(bitPattern: ObjectIdentifier(cell)))
        try await cell.run(
            boundTo: handle, deadline: deadline,
            onCancel: { [weak self] reason in
                // Dropped, not resumed: the cell has resumed its waiter with the reason already.
                _ = self?.state.withLock { $0.waiters.cancel(id, reason: reason, asked: true) }
            }
        ) { cell in
            let granted = state.withLock { state -> Bool in
                if !state.held {
                    state.held = true
                    return true
                }
                state.waiters.append(cell, id: id)
                return false
            }
            // A cancel that reached the wait while it started wins: the lease it was granted goes on.
            if granted, !cell.succeed(()) { release() }
        }
    }

    /// Takes the lease if nobody holds it and nobody waits for it; returns whether it did.
    public func tryAcquire() -> Bool {
        state.withLock { state in
            guard !state.held, state.waiters.isEmpty else { return false }
            state.held = true
            return true
        }
    }

    /// Gives the lease up: the first waiter takes it, or it becomes free. Releasing a lease nobody holds does
    /// nothing.
    public func release() {
        while true {
            let next = state.withLock { state -> CancellationCell<Void>? in
                guard state.held else { return nil }
                if let first = state.waiters.popFirst() { return first }
                state.held = false
                return nil
            }
            // A waiter whose cancel won the race refuses the lease: it stays held, for the next one.
            guard let next, !next.succeed(()) else { return }
        }
    }
}
