/// A one-shot event: set once (any thread, non-blocking), awaited by any number of tasks. (Not a Unix signal:
/// ResourceKit never installs signal handlers.)
///
/// Adapters use it for "the next operation must wait until X happened" (a cancel request finished, a
/// connection drained); tests use it to wait for an event instead of sleeping. Waiting after the event was
/// set returns at once.
///
/// ```swift
/// let drained = OneShotEvent()
/// // on the thread that finishes the work:
/// drained.set()
/// // in any task:
/// try await drained.wait(deadline: .now + .seconds(1))
/// ```
public final class OneShotEvent: Sendable {
    /// Waiters park in a ``WaiterQueue`` (numbered by their cell's identity, unique while it is parked). Each is a
    /// ``CancellationCell``, whose `onCancel` runs only after `start` returned (after it parked), so a cancel
    /// always finds it asked: the queue never keeps a reason for it.
    private struct State: Sendable {
        var isSet = false
        var waiters = WaiterQueue<CancellationCell<Void>>()
    }

    private let state = Locked(State())

    /// Creates an event that is not set yet.
    public init() {}

    /// `true` once ``set()`` ran.
    public var isSet: Bool { state.withLock { $0.isSet } }

    /// Sets the event and resumes every waiter. Idempotent.
    public func set() {
        let waiters = state.withLock { state -> [CancellationCell<Void>] in
            guard !state.isSet else { return [] }
            state.isSet = true
            return state.waiters.removeAll()
        }
        for waiter in waiters { waiter.succeed(()) }
    }

    /// Waits until the event is set.
    ///
    /// Cancellation: throws `CancellationError` at once when the task is cancelled (the event is unaffected),
    /// unless `shielded`; ``DeadlineExceededError`` when `deadline` passes (shielded or not). With `handle`, a
    /// cancel of that resource, of its scope or the scope's deadline ends the wait too, shielded or not, with its
    /// reason (a deadline as ``DeadlineExceededError``), and the wait is one of the handle's running operations: an
    /// adapter's "wait until the connection is free" (a drain still holds it) stops when the resource is cancelled,
    /// as its other waits do. A handle that is already cancelled ends the wait before it parks.
    public func wait(
        boundTo handle: ResourceHandle? = nil, deadline: ContinuousClock.Instant? = nil, shielded: Bool = false
    ) async throws {
        if isSet { return }
        let cell = CancellationCell<Void>()
        let id = WaiterQueue<CancellationCell<Void>>.ID(UInt(bitPattern: ObjectIdentifier(cell)))
        try await cell.run(
            boundTo: handle, deadline: deadline, shielded: shielded,
            onCancel: { [weak self] reason in
                // Dropped, not resumed: the cell has resumed its waiter with the reason already.
                _ = self?.state.withLock { $0.waiters.cancel(id, reason: reason, asked: true) }
            }
        ) { cell in
            let alreadySet = state.withLock { state -> Bool in
                if state.isSet { return true }
                state.waiters.append(cell, id: id)
                return false
            }
            if alreadySet { cell.succeed(()) }
        }
    }
}
