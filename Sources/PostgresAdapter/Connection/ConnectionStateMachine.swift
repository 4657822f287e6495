/// The lifecycle of one Postgres connection as a value: which query is on the wire, whether a cancel may be
/// sent and for which query, whose `57014` a result is, and what must happen before the next query may start.
///
/// ``PostgresConnection`` holds one under its lock, feeds it events and performs the actions it returns after
/// releasing the lock. It makes no I/O itself and is tested without any (`ConnectionStateMachineTests`).
///
/// The rules it enforces (Docs/Architecture.md, "The Postgres adapter"):
/// - a cancel (request or fast path) is sent only while *that* query is on the wire;
/// - the next query starts only after the previous one reached ReadyForQuery *and* every cancel sent for it
///   finished (its socket's EOF seen), so a late cancel can never hit the next query;
/// - a connection whose state is unknown is broken: never used again.
struct ConnectionStateMachine: Sendable, Equatable {
    typealias QueryID = UInt64

    /// What is on the wire.
    enum Wire: Sendable, Equatable {
        /// ReadyForQuery seen: nothing of ours is on the wire.
        case idle
        /// A query was sent and its caller is collecting its results.
        case executing(QueryID)
        /// The query's caller left (cancelled, or a stream dropped): its results are still on the wire and are
        /// drained before the next query.
        case abandoned(QueryID)
        /// Lost, or in a state nobody can know: never used again.
        case broken
        /// Closed by its owner.
        case closed
    }

    private(set) var wire: Wire = .idle
    /// An operation holds the connection.
    private(set) var leased = false
    /// The query our cancels were sent for (what makes its `57014` ours).
    private(set) var cancelledQuery: QueryID?
    /// Cancels sent and not finished yet.
    private(set) var cancelsInFlight = 0
    /// A transaction was interrupted: roll back before the next operation.
    private(set) var needsRollback = false
    private var lastQuery: QueryID = 0

    /// `true` once the connection can no longer be used.
    var isUnusable: Bool { wire == .broken || wire == .closed }

    /// `true` when the next operation has cleanup to do first.
    var needsCleanup: Bool {
        if case .abandoned = wire { return true }
        return cancelsInFlight > 0 || needsRollback
    }

    /// The query on the wire, executing or abandoned.
    var queryOnWire: QueryID? {
        switch wire {
        case .executing(let id), .abandoned(let id): id
        case .idle, .broken, .closed: nil
        }
    }

    // MARK: operations

    enum BeginAction: Sendable, Equatable {
        /// The connection is the caller's and clean: send.
        case ready
        /// The connection is the caller's, but ``nextCleanupStep()`` must run to `.done` first.
        case cleanUpFirst
        /// Broken or closed.
        case refuseUnusable
        /// Another operation holds it.
        case refuseBusy
    }

    /// An operation wants the connection.
    mutating func begin() -> BeginAction {
        if isUnusable { return .refuseUnusable }
        if leased { return .refuseBusy }
        leased = true
        return needsCleanup ? .cleanUpFirst : .ready
    }

    /// The operation that held the connection is over (its results read, or it left them to drain).
    mutating func end() {
        leased = false
    }

    enum CleanupStep: Sendable, Equatable {
        /// Wait until the cancels in flight finished.
        case waitForCancels
        /// Read and discard results until ReadyForQuery.
        case drain(QueryID)
        /// Send `ROLLBACK` (the flag is cleared: a failed rollback breaks the connection).
        case rollback
        case done
        /// The connection became unusable.
        case unusable
    }

    /// What the cleanup before the next query does next. The order is asyncpg's guard: the cancel's EOF, then
    /// ReadyForQuery, then the transaction.
    mutating func nextCleanupStep() -> CleanupStep {
        if isUnusable { return .unusable }
        if cancelsInFlight > 0 { return .waitForCancels }
        if case .abandoned(let id) = wire { return .drain(id) }
        if needsRollback {
            needsRollback = false
            return .rollback
        }
        return .done
    }

    /// A query was handed to libpq (`PQsendQueryParams` succeeded). Returns its id.
    mutating func sent() -> QueryID {
        precondition(leased && wire == .idle && cancelsInFlight == 0, "send on a connection that is not ready")
        lastQuery += 1
        wire = .executing(lastQuery)
        cancelledQuery = nil
        return lastQuery
    }

    /// The results of `id` ended (ReadyForQuery). Returns whether a `57014` in them is ours.
    mutating func resultsEnded(_ id: QueryID) -> (ended: Bool, ourCancel: Bool) {
        guard queryOnWire == id else { return (false, false) }
        wire = .idle
        return (true, cancelledQuery == id)
    }

    /// The caller of `id` left before ReadyForQuery (cancelled, or a stream was dropped).
    mutating func operationLeft(_ id: QueryID) {
        if wire == .executing(id) { wire = .abandoned(id) }
    }

    /// An interrupted transaction must be rolled back before the next operation.
    mutating func requireRollback() {
        if !isUnusable { needsRollback = true }
    }

    // MARK: cancellation

    enum CancelAction: Sendable, Equatable {
        /// Send a cancel for this query (fast path or cancel request; the driver picks).
        case send(QueryID)
        /// Nothing to do: the query already ended, a cancel for it is in flight, or the connection is unusable.
        case none
    }

    /// Someone wants query `id` cancelled. `resend` asks again for a query whose earlier cancel finished
    /// without stopping it (a cancel request that reached another server behind a balancer).
    mutating func cancelRequested(_ id: QueryID, resend: Bool = false) -> CancelAction {
        guard queryOnWire == id else { return .none }
        if cancelledQuery == id, cancelsInFlight > 0 || !resend { return .none }
        cancelledQuery = id
        cancelsInFlight += 1
        return .send(id)
    }

    enum CancelFinishedAction: Sendable, Equatable {
        /// The last cancel in flight finished: wake whoever waits to clean up.
        case cancelsSettled
        case none
    }

    /// A cancel finished (the control statement returned, or the cancel request's socket reached EOF).
    mutating func cancelFinished() -> CancelFinishedAction {
        guard cancelsInFlight > 0 else { return .none }
        cancelsInFlight -= 1
        return cancelsInFlight == 0 ? .cancelsSettled : .none
    }

    /// Whether a resend for `id` makes sense now: it is still on the wire and nothing is in flight for it.
    func mayResendCancel(_ id: QueryID) -> Bool {
        queryOnWire == id && cancelledQuery == id && cancelsInFlight == 0
    }

    // MARK: failures and the end

    /// The connection was lost, or a step left it in a state nobody can know.
    mutating func lost() {
        if wire != .closed { wire = .broken }
        needsRollback = false
    }

    enum CloseAction: Sendable, Equatable {
        /// Cancel this query on the server, wait for the cancels in flight (bounded), then finish.
        case cancelThenFinish(QueryID)
        /// Wait for the cancels in flight (bounded), then finish.
        case settleThenFinish
        case finish
        case alreadyClosed
    }

    /// The owner closes the connection.
    mutating func close() -> CloseAction {
        if wire == .closed { return .alreadyClosed }
        let onWire = queryOnWire
        let pendingCancel = cancelsInFlight > 0
        wire = .closed
        needsRollback = false
        if let onWire, cancelledQuery != onWire {
            cancelledQuery = onWire
            cancelsInFlight += 1
            return .cancelThenFinish(onWire)
        }
        return pendingCancel ? .settleThenFinish : .finish
    }
}
