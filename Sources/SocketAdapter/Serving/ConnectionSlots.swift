import ResourceKit

/// Where a server's accept loop waits (Docs/Architecture.md, "Serving"): for a free connection slot when
/// ``SocketServer/Configuration/maxConnections`` run already, and through the pause after an accept that failed for
/// lack of descriptors, which the end of any connection cuts short (its descriptor is free again).
///
/// Both waits are a ``CancellationCell``: the loop's task (or scope) cancelled, they throw at once.
final class ConnectionSlots: Sendable {
    private struct State: Sendable {
        var active = 0
        /// The server stops accepting (its shutdown began): no slot is handed out any more.
        var stopped = false
        /// The accept loop, waiting for a slot or pausing.
        var waiter: CancellationCell<Void>?
    }

    private let limit: Int?
    private let state = Locked(State())

    init(limit: Int?) {
        self.limit = limit
    }

    /// Connections running now.
    var active: Int { state.withLock { $0.active } }

    /// Takes a slot, waiting while `limit` connections run; `false` once ``stop()`` was called (no slot taken).
    ///
    /// Cancellation: throws `CancellationError` (or the scope's reason) at once; no slot is taken then.
    func take() async throws -> Bool {
        while true {
            let cell = CancellationCell<Void>()
            let taken = state.withLock { state -> Bool? in
                if state.stopped { return false }
                if let limit, state.active >= limit {
                    state.waiter = cell
                    return nil
                }
                state.active += 1
                return true
            }
            if let taken { return taken }
            do {
                try await cell.run { _ in }
            } catch {
                state.withLock { if $0.waiter === cell { $0.waiter = nil } }
                throw error
            }
        }
    }

    /// A connection ended: its slot is free, and the loop (waiting for a slot, or pausing) wakes.
    func give() {
        let waiter = state.withLock { state -> CancellationCell<Void>? in
            state.active -= 1
            return state.waiter.take()
        }
        waiter?.succeed(())
    }

    /// The server stops accepting: a waiting ``take()`` returns `false`, a ``pause(for:)`` ends, and every later
    /// ``take()`` returns `false` at once.
    func stop() {
        let waiter = state.withLock { state -> CancellationCell<Void>? in
            state.stopped = true
            return state.waiter.take()
        }
        waiter?.succeed(())
    }

    /// A slot taken for an accept that did not happen: given back, waking nobody.
    func untake() {
        state.withLock { $0.active -= 1 }
    }

    /// Waits `delay`, or less when a connection ends meanwhile (``give()``).
    ///
    /// Cancellation: throws `CancellationError` (or the scope's reason) at once.
    func pause(for delay: Duration) async throws {
        let cell = CancellationCell<Void>()
        guard
            state.withLock({ state -> Bool in
                guard !state.stopped else { return false }
                state.waiter = cell
                return true
            })
        else { return }
        defer { state.withLock { if $0.waiter === cell { $0.waiter = nil } } }
        do {
            try await cell.run(deadline: .now + delay) { _ in }
        } catch is DeadlineExceededError {
            // The pause is over, unless the deadline was the scope's (then the scope is cancelled).
            try ResourceScope.current?.checkCancellation()
        }
    }
}
