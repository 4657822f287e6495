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

    /// The sub-protocol of the query on the wire: how a drain must read (or end) it.
    enum WireMode: Sendable, Equatable {
        /// Results until ReadyForQuery.
        case simple
        /// `COPY ... TO STDOUT`: copy data, then results.
        case copyOut
        /// `COPY ... FROM STDIN`: the client still owes copy data; a drain ends it with CopyFail.
        case copyIn
        /// `COPY ... FROM STDIN` ended by the client (CopyDone or CopyFail queued): flush, then results.
        case copyInEnded
        /// Pipeline mode: results of several statements, separated by NULLs, up to the sync.
        case pipeline
    }

    /// The cancels sent for one query. Kept after they finished, until the next query is sent: it is what
    /// makes that query's `57014` ours.
    struct Cancels: Sendable, Equatable {
        /// The query they were sent for.
        let query: QueryID
        /// Sent and not finished yet.
        var inFlight: Int
        /// When the first went out: resends stop at the connection's `cancelTimeout` after it.
        let firstAt: ContinuousClock.Instant
        /// How many were sent again because the query stayed unanswered.
        var resends: Int
    }

    /// What a resend of a cancel is based on.
    struct ResendBasis: Sendable, Equatable {
        let firstAt: ContinuousClock.Instant
        let resends: Int
    }

    private(set) var wire: Wire = .idle
    /// How the query on the wire is read (``WireMode/simple`` when nothing is).
    private(set) var mode: WireMode = .simple
    /// An operation holds the connection.
    private(set) var leased = false
    /// The cancels of the query on the wire (or of the last one, while they finish).
    private(set) var cancels: Cancels?
    /// A transaction was interrupted: roll back before the next operation.
    private(set) var needsRollback = false
    private var lastQuery: QueryID = 0

    /// Cancels sent and not finished yet.
    var cancelsInFlight: Int { cancels?.inFlight ?? 0 }

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

    /// A query was handed to libpq (`PQsendQueryParams` succeeded), read as `mode`. Returns its id.
    mutating func sent(mode: WireMode = .simple) -> QueryID {
        precondition(leased && wire == .idle && cancelsInFlight == 0, "send on a connection that is not ready")
        lastQuery += 1
        wire = .executing(lastQuery)
        self.mode = mode
        cancels = nil
        return lastQuery
    }

    /// The query on the wire moved to another sub-protocol (a COPY began or ended, a pipeline was entered).
    mutating func enter(_ mode: WireMode) {
        self.mode = mode
    }

    /// The results of `id` ended (ReadyForQuery). Returns whether a `57014` in them is ours.
    mutating func resultsEnded(_ id: QueryID) -> (ended: Bool, ourCancel: Bool) {
        guard queryOnWire == id else { return (false, false) }
        wire = .idle
        mode = .simple
        return (true, cancels?.query == id)
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

    /// Someone wants query `id` cancelled, at `now`. `resend` asks again for a query whose earlier cancel
    /// finished without stopping it (a cancel request that reached another server behind a balancer).
    mutating func cancelRequested(_ id: QueryID, resend: Bool = false, now: ContinuousClock.Instant) -> CancelAction {
        guard queryOnWire == id else { return .none }
        if var current = cancels, current.query == id {
            guard current.inFlight == 0, resend else { return .none }
            current.inFlight += 1
            current.resends += 1
            cancels = current
            return .send(id)
        }
        cancels = Cancels(query: id, inFlight: 1, firstAt: now, resends: 0)
        return .send(id)
    }

    enum CancelFinishedAction: Sendable, Equatable {
        /// The last cancel in flight finished: wake whoever waits to clean up.
        case cancelsSettled
        case none
    }

    /// A cancel finished (the control statement returned, or the cancel request's socket reached EOF).
    mutating func cancelFinished() -> CancelFinishedAction {
        guard var current = cancels, current.inFlight > 0 else { return .none }
        current.inFlight -= 1
        cancels = current
        return current.inFlight == 0 ? .cancelsSettled : .none
    }

    /// Whether a resend for `id` makes sense now (it is still on the wire, was cancelled, and nothing is in
    /// flight for it), and what it is based on.
    func resendBasis(_ id: QueryID) -> ResendBasis? {
        guard queryOnWire == id, let cancels, cancels.query == id, cancels.inFlight == 0 else { return nil }
        return ResendBasis(firstAt: cancels.firstAt, resends: cancels.resends)
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

    /// The owner closes the connection, at `now`.
    mutating func close(now: ContinuousClock.Instant) -> CloseAction {
        if wire == .closed { return .alreadyClosed }
        let onWire = queryOnWire
        let pendingCancel = cancelsInFlight > 0
        wire = .closed
        mode = .simple
        needsRollback = false
        if let onWire, cancels?.query != onWire {
            // Cancels in flight always belong to the query on the wire (a query is sent only when none are).
            cancels = Cancels(query: onWire, inFlight: cancelsInFlight + 1, firstAt: now, resends: 0)
            return .cancelThenFinish(onWire)
        }
        return pendingCancel ? .settleThenFinish : .finish
    }
}
