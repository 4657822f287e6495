import CLibPQ
public import ResourceKit

/// One Postgres connection through libpq's non-blocking API and the ResourceKit reactor. No libpq call that
/// blocks ever runs on the cooperative pool.
///
/// Cancellation (the point of the module):
/// - task cancelled while a query runs: from inside `withTaskCancellationHandler`, a cancel request
///   (`PQcancel`) is queued on the blocking pool; the caller gets `CancellationError` at once, without waiting
///   for the server. The connection stays usable: its next operation first waits until the cancelled query
///   drained to ReadyForQuery *and* the cancel request finished, so a late cancel can never hit the next query.
/// - cancelled before the query was sent: nothing is sent. Cancelled after it completed: nothing is sent and
///   the result is returned.
/// - our own `57014` is `CancellationError`; a `57014` from the server's `statement_timeout` is a
///   ``PostgresError``; the scope's deadline gives `DeadlineExceededError` (and cancels the query on the server).
/// - a cancel request or drain that does not finish within ``cancelTimeout`` marks the connection broken: it is
///   closed, never reused.
public final class PostgresConnection: ManagedResource, CustomStringConvertible {
    /// The resource kind of connections.
    public static let kind = ResourceKind(name: "postgres.connection", closeTimeout: .seconds(5))

    struct State: Sendable {
        var conn: PGConnPointer?
        var socket: Int32 = -1
        var cancel: PGCancelPointer?
        /// The query on the wire (sent, ReadyForQuery not yet seen).
        var inFlight: UInt64?
        /// The query whose cancel request was queued.
        var cancelRequested: UInt64?
        /// Finished when the last cancel request returned.
        var cancelDone: Signal?
        /// Results of a cancelled or abandoned query are still on the wire.
        var needsDrain = false
        /// Roll back before the next operation (a transaction was interrupted by cancellation).
        var needsRollback = false
        /// An operation holds the connection.
        var busy = false
        var broken = false
        var nextQueryID: UInt64 = 0
        var backendPID: Int32 = 0
    }

    let state = Locked(State())
    let reactor: IOReactor
    let pool: BlockingPool
    private let password: String?
    private let handleSlot = Locked<ResourceHandle?>(nil)
    private let cancelChannel = Locked<PostgresCancelChannel?>(nil)
    /// How long a cancel request, or draining a cancelled query, may take before the connection is broken.
    public let cancelTimeout: Duration

    init(conn: OpaquePointer, password: String?, reactor: IOReactor, pool: BlockingPool, cancelTimeout: Duration) {
        state.withLock { $0.conn = PGConnPointer(raw: conn) }
        self.password = password
        self.reactor = reactor
        self.pool = pool
        self.cancelTimeout = cancelTimeout
    }

    public var description: String { "PostgresConnection(pid \(backendPID))" }

    /// The server process id of this connection (what `pg_stat_activity.pid` shows).
    public var backendPID: Int32 { state.withLock { $0.backendPID } }

    /// `true` once the connection can no longer be used (lost, or its state is unknown).
    public var isBroken: Bool { state.withLock { $0.broken || $0.conn == nil } }

    /// `true` when the next operation has cleanup to do first (a cancelled query to drain, a cancel request in
    /// flight, a rollback).
    public var needsReset: Bool { state.withLock { $0.needsDrain || $0.cancelDone != nil || $0.needsRollback } }

    var handle: ResourceHandle? { handleSlot.withLock { $0 } }

    func attach(_ handle: ResourceHandle) { handleSlot.withLock { $0 = handle } }

    // MARK: cancel requests

    /// Uses `channel` (a warm control connection) to cancel this connection's queries, falling back to the
    /// cancel request whenever the channel cannot be used. `nil` turns the fast path off.
    public func useCancelChannel(_ channel: PostgresCancelChannel?) {
        cancelChannel.withLock { $0 = channel }
    }

    /// Queues a cancel request for query `id` if (and only if) it is still on the wire. Non-blocking; safe
    /// from `onCancel`.
    func requestCancel(_ id: UInt64) {
        let job = state.withLock { state -> (PGCancelPointer?, Signal)? in
            guard state.inFlight == id, state.cancelRequested != id, !state.broken else { return nil }
            state.cancelRequested = id
            let done = Signal()
            state.cancelDone = done
            return (state.cancel, done)
        }
        guard let (cancel, done) = job else { return }
        if let channel = cancelChannel.withLock({ $0 }), channel.tryCancel(backend: backendPID, done: done) {
            return
        }
        guard let cancel else {
            // No BackendKeyData (some proxies): cancellation degrades to closing the connection.
            state.withLock { $0.broken = true }
            done.set()
            return
        }
        let accepted = pool.submit {
            var buffer = [CChar](repeating: 0, count: 256)
            _ = PQcancel(cancel.raw, &buffer, 256)
            done.set()
        }
        if !accepted {
            state.withLock { $0.broken = true }
            done.set()
        }
    }

    /// Asks the server to cancel whatever this connection is running now (from any task: a sibling, a
    /// supervisor). The query's caller gets `CancellationError`. A no-op when idle.
    public func cancelCurrentQuery() {
        if let id = state.withLock({ $0.inFlight }) { requestCancel(id) }
    }

    // MARK: ManagedResource

    /// Sends a cancel request for the running query, if any (from the blocking pool, never inline).
    public func cancel() {
        cancelCurrentQuery()
    }

    /// Closes the connection: a query still running is cancelled on the server first (bounded by
    /// ``cancelTimeout``), then `PQfinish`.
    public func close() async throws {
        cancelCurrentQuery()
        if let pending = state.withLock({ $0.cancelDone }) {
            do { try await pending.wait(deadline: .now + cancelTimeout) } catch {}
        }
        let cancelFinished = state.withLock { $0.cancelDone?.isSet ?? true }
        let (conn, cancel) = state.withLock { state -> (PGConnPointer?, PGCancelPointer?) in
            defer {
                state.conn = nil
                state.broken = true
            }
            // Only a socket libpq still has open is ours to deregister: after a failed connect or a lost
            // connection libpq already closed it, and the number may belong to someone else by now.
            if let conn = state.conn {
                let live = PQsocket(conn.raw)
                if live >= 0 { reactor.descriptorWillClose(live) }
            }
            return (state.conn, state.cancel)
        }
        if let conn { PQfinish(conn.raw) }
        // A cancel request that never returned (frozen server) may still use the PGcancel: leak it rather than
        // free it under that thread.
        if let cancel, cancelFinished { PQfreeCancel(cancel.raw) }
        handleSlot.withLock { $0 = nil }
    }
}
