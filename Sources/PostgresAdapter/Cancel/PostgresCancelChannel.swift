public import ResourceKit

/// The cancel fast path: one warm control connection that stops a backend with
/// `SELECT pg_cancel_backend($1)` instead of a cancel request (which costs a new TCP connection and a
/// server-side fork on every cancel).
///
/// The same guard as the cancel request applies: the cancelled connection's next query waits until the
/// control call returned. The channel falls back to the cancel request (``tryCancel(backend:)`` returns `nil`)
/// while its control connection is missing, busy with another cancel, broken, or lacks the privilege (the
/// same role as the target, or `pg_signal_backend`).
public final class PostgresCancelChannel: Sendable {
    private struct State: Sendable {
        var control: PostgresConnection?
        var busy = false
        var disabled = false
        var fastCancels = 0
    }

    private let state = Locked(State())

    /// Creates a channel over `control`, a connection used for nothing else. The channel closes it in
    /// ``close()``.
    public init(control: PostgresConnection) {
        state.withLock { $0.control = control }
    }

    /// Cancels delivered through the control connection so far.
    public var fastCancelCount: Int { state.withLock { $0.fastCancels } }

    /// Starts `pg_cancel_backend(backend)` on the control connection and sets `done` when the call returned.
    /// Returns `false` (and leaves `done` alone) when the fast path cannot be used now: fall back to a cancel
    /// request. Non-blocking: safe from `onCancel`.
    public func tryCancel(backend pid: Int32, done: Signal) -> Bool {
        let control = state.withLock { state -> PostgresConnection? in
            guard !state.disabled, !state.busy, let control = state.control, !control.isBroken else { return nil }
            state.busy = true
            state.fastCancels += 1
            return control
        }
        guard let control else { return false }
        // Async work started from a synchronous context: the channel owns it (one at a time, `busy`), and its
        // end is observable through `done`, which the cancelled connection's next query awaits.
        Task {
            do {
                _ = try await control.query("SELECT pg_cancel_backend($1::int)", [Int(pid)])
            } catch let error as PostgresError where error.sqlState == "42501" {
                self.state.withLock { $0.disabled = true }  // no privilege: stop trying, use cancel requests
            } catch {}
            self.state.withLock { $0.busy = false }
            done.set()
        }
        return true
    }

    /// Closes the control connection.
    public func close() async {
        let control = state.withLock { state -> PostgresConnection? in
            defer { state.control = nil; state.disabled = true }
            return state.control
        }
        await control?.handle?.close()
    }
}
