import CLibPQ
public import ResourceKit
public import ResourceKitIO
import Synchronization

/// One Postgres connection through libpq's non-blocking API and the ResourceKit reactor. No libpq call that
/// can block runs on the cooperative pool: host names are resolved on the blocking pool before libpq sees
/// them, cancel requests are sent from the blocking pool.
///
/// Cancellation (the point of the module), at three levels:
/// - the *operation*: the task running a query is cancelled (also when it does not own the connection's
///   scope). From inside `withTaskCancellationHandler` a cancel goes out (the fast path if the pool has a
///   verified one, else a cancel request on the blocking pool); the caller gets `CancellationError` at once,
///   without waiting for the server. The connection lives on.
/// - the *resource*: its scope is cancelled, its deadline passes, or ``cancel()`` is called: the same cancel
///   goes out, and every operation on it ends with the reason's error (`DeadlineExceededError` for a deadline).
/// - the *borrowing scope*: the calling task's innermost scope does not own the connection (a pooled one, one
///   an outer scope owns) and is cancelled or passes its deadline: as the operation level, with the scope's
///   reason (Docs/Architecture.md, "Three levels of cancellation").
///
/// The guard (Docs/Architecture.md, "The Postgres adapter"): a cancel is sent only while *that* query is on the wire,
/// and the next query starts only after the cancelled one reached ReadyForQuery *and* every cancel for it finished. A
/// cancel request that does not stop the query (it reached another server behind a balancer) is sent again, with
/// backoff, while the query is still on the wire, up to ``cancelTimeout``. A cleanup that does not finish
/// within ``cancelTimeout`` breaks the connection: closed, never reused.
///
/// - cancelled before the query was sent: nothing is sent. Cancelled after it completed: nothing is sent and
///   the result is returned.
/// - our own `57014` is `CancellationError`; a `57014` from a deadline the statement carried to the server
///   (``PostgresSessionOptions/carriesDeadlineToServer``) is `DeadlineExceededError`; a `57014` from a
///   `statement_timeout` of your own is a ``PostgresError``.
/// - libpq never writes to stderr: notices go to the handler given at connect (default: registry events).
public final class PostgresConnection: ManagedResource, CustomStringConvertible {
    /// The resource kind of connections.
    public static let kind = ResourceKind(name: "postgres.connection", closeTimeout: .seconds(5))

    struct State: Sendable {
        var machine = ConnectionStateMachine()
        /// libpq's connection; `nil` before the connect started and after the close.
        var conn: LibPQConnection?
    }

    /// The sub-protocol of the query on the wire (the state machine holds it).
    typealias WireMode = ConnectionStateMachine.WireMode

    let state = Locked(State())
    let reactor: IOReactor
    let pool: BlockingPool
    let notices: NoticeSink
    let statistics: PostgresCancelStatistics
    /// What the server session is asked for (a vanished-client check, deadlines carried to the server).
    public let session: PostgresSessionOptions
    private let registration = HandleSlot()
    let cancelChannel = Locked<PostgresCancelChannel?>(nil)
    /// The columns of the latest result, for the next result of the same shape.
    let recentColumns = RecentColumns()
    /// How many answer waits of this connection looked at the socket before parking (for tests).
    let answerLooks = Atomic<Int>(0)
    /// How long a cancel, or draining a cancelled query, may take before the connection is broken.
    public let cancelTimeout: Duration

    init(
        reactor: IOReactor,
        pool: BlockingPool,
        cancelTimeout: Duration,
        statistics: PostgresCancelStatistics,
        session: PostgresSessionOptions,
        onNotice: (@Sendable (PostgresNotice) -> Void)?
    ) {
        self.session = session
        self.reactor = reactor
        self.pool = pool
        self.cancelTimeout = cancelTimeout
        self.statistics = statistics
        self.notices = NoticeSink(handler: onNotice)
    }

    public var description: String {
        if let pid = backendPID { return "PostgresConnection(pid \(pid))" }
        return "PostgresConnection(unverified backend)"
    }

    /// The server process id of this connection, as `pg_stat_activity.pid` shows it: verified at connect
    /// against `pg_backend_pid()`. `nil` when it could not be verified (behind a pooler such as PgBouncer the
    /// pid libpq holds is the pooler's key, not a process), or the connection is not open.
    public var backendPID: Int32? { state.withLock { $0.machine.backendKey.identity?.pid } }

    /// The sockets this connection owns now: its own and its control connection's (the cancel fast path), for
    /// the conformance kit's leak check, which attributes descriptors to the resource under test.
    @_spi(Testing) public var ownedDescriptors: [Int32] {
        let own = state.withLock { $0.conn?.socket ?? -1 }
        return (own >= 0 ? [own] : []) + (cancelChannel.withLock { $0 }?.controlDescriptors ?? [])
    }

    /// The verified backend and server (see ``PostgresBackendIdentity``), or `nil` when unverified.
    public var backendIdentity: PostgresBackendIdentity? { state.withLock { $0.machine.backendKey.identity } }

    /// The pid in the server's BackendKeyData (`PQbackendPID`): the key cancel requests carry. Behind a
    /// pooler it names no process. `0` when the server sent none.
    public var cancelKeyPID: Int32 { state.withLock { $0.machine.backendKey.pid } }

    /// `true` once the connection can no longer be used (lost, or its state is unknown).
    public var isBroken: Bool { state.withLock { $0.machine.isUnusable || $0.conn == nil } }

    /// `true` when the next operation has cleanup to do first (a cancelled query to drain, a cancel in
    /// flight, a rollback, a pool's session reset that the next statement carries or a cleanup runs).
    public var needsReset: Bool { state.withLock { $0.machine.needsCleanup } }

    /// Which path this connection's cancels took (shared with its pool's connections, if pooled).
    public var cancelStatistics: PostgresCancelStatistics { statistics }

    var handle: ResourceHandle? { registration.handle }

    /// The handle's check before an operation begins. After `close()` the slot keeps the closed handle, whose
    /// check throws `CancellationError`; a closed connection answers with ``PostgresError`` `connection`
    /// instead, which a caller cannot take for its own task's cancellation. The connection's state is read only
    /// when the handle's check throws.
    func checkHandleBeforeBegin() throws {
        do {
            try handle?.checkCancellation()
        } catch {
            if state.withLock({ $0.machine.isClosed }) {
                throw PostgresError(.connection, "the connection is closed or broken")
            }
            throw error
        }
    }

    func attach(_ handle: ResourceHandle) { registration.keep(handle) }

    /// Uses `channel` (a pool's control connection) for the fast cancel path, for as long as the channel is
    /// verified to reach this connection's server. `nil` turns the fast path off. Cancel requests remain the
    /// fallback for every cancel the channel cannot deliver.
    public func useCancelChannel(_ channel: PostgresCancelChannel?) {
        cancelChannel.withLock { $0 = channel }
    }

    /// Asks the server to cancel whatever this connection is running now (from any task: a sibling, a
    /// supervisor). The query's caller gets `CancellationError`. A no-op when idle. Non-blocking.
    public func cancelCurrentQuery() {
        if let id = state.withLock({ $0.machine.queryOnWire }) { requestCancel(id) }
    }

    // MARK: ManagedResource

    /// Cancels the running query on the server, if any (non-blocking: the cancel goes out from the blocking
    /// pool or the control connection, never inline).
    public func cancel() {
        cancelCurrentQuery()
    }

    /// Closes the connection: a query still on the wire is cancelled on the server first, and cancels in
    /// flight are awaited (bounded by ``cancelTimeout``, and by the kind's `closeTimeout` less a second, so
    /// that `PQfinish` always runs within the close's bound), then `PQfinish`.
    public func close() async throws {
        let action = state.withLock { $0.machine.close(now: .now) }
        if case .cancelThenFinish(let id, let route, _) = action { deliverCancel(id, route) }
        switch action {
        case .cancelThenFinish(_, _, let settlement), .settleThenFinish(let settlement):
            do {
                let bound = min(cancelTimeout, Self.kind.closeTimeout - .seconds(1))
                try await settlement.event.wait(deadline: .now + bound)
            } catch {
                // The bound passed (a frozen server): close anyway; the PGcancel is kept alive below.
            }
        case .finish, .alreadyClosed:
            break
        }
        let (conn, cancelKey) = state.withLock { state -> (LibPQConnection?, PGCancelPointer?) in
            defer { state.conn = nil }
            // Only a socket libpq still has open is ours to deregister: after a failed connect or a lost
            // connection libpq already closed it, and the number may belong to someone else by now.
            if let live = state.conn?.socket, live >= 0 { reactor.descriptorWillClose(live) }
            // A cancel request that never returned (frozen server) may still use the PGcancel: the machine then
            // hands out none, and the key is left to that thread rather than freed under it.
            return (state.conn, state.machine.keyReleased())
        }
        if let conn { conn.finish() }
        if let cancelKey { cancelKey.free() }
        // The closed handle stays in the slot, as `HandleSlot` asks: a later operation's checks throw
        // (`checkHandleBeforeBegin()` turns that into this connection's own "closed" error).
    }
}
