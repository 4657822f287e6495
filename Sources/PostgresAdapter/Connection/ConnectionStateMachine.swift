import ResourceKit

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

    /// Whether the connection can be used, and if so what is on its wire. Only a usable connection has a wire and
    /// can owe a rollback: a broken or closed one has neither.
    enum Usability: Sendable, Equatable {
        case usable(Usable)
        /// Lost, or in a state nobody can know: never used again.
        case broken
        /// Closed by its owner.
        case closed
    }

    struct Usable: Sendable, Equatable {
        var onWire: OnWire = .idle
        /// A transaction was interrupted: roll back before the next operation.
        var owesRollback = false
        /// The pool's session reset is owed (it could not be written behind the work, or ran inside a block
        /// that was rolled back): run it, after the rollback, before the next operation.
        var owesSessionReset = false
    }

    /// What is on the wire of a usable connection.
    enum OnWire: Sendable, Equatable {
        /// ReadyForQuery seen: nothing of ours is on the wire.
        case idle
        /// A query was sent and its caller is collecting its results, read as the mode says.
        case executing(QueryID, WireMode)
        /// The query's caller left (cancelled, or a stream dropped): its results are still on the wire and are
        /// drained (as the mode says) before the next query.
        case abandoned(QueryID, WireMode)
    }

    /// The old flat view of the wire, for assertions and for the few readers that do not care about the mode.
    enum Wire: Sendable, Equatable {
        case idle
        case executing(QueryID)
        case abandoned(QueryID)
        case broken
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
        /// A statement carrying its deadline to the server: a pipeline of prelude, statement and epilogue, and
        /// where its reading is (Docs/Architecture.md, "The Postgres adapter").
        case carried(CarriedDeadline)
        /// The pool's session reset on a round trip of its own (a cleanup's, when the next operation could not
        /// carry it; Docs/Architecture.md, "Clean sessions"): results until ReadyForQuery, the rest of its bytes
        /// flushed first; an error breaks the connection (its session is then in no known state).
        case sessionReset
        /// The pool's session reset carried in front of a statement, in one pipeline (reset, sync, the work,
        /// sync; or reset, the statement, one sync: ``PrefixedWork/grouped(resetStatements:)``): the reset's
        /// results are taken by the connection up to its end, then the work is read as `then` says. A reset
        /// statement that fails leaves the reset owed again.
        case resetPrefix(then: PrefixedWork)
        /// One statement inside a pipeline (after a carried reset): its results, a NULL, the sync. A statement
        /// skipped because the reset in its group failed is read and dropped (its caller was handed the reset's
        /// error instead).
        case pipelinedStatement

        /// Results of several statements separated by NULLs, up to a sync.
        var isPipeline: Bool {
            switch self {
            case .pipeline, .carried, .resetPrefix, .pipelinedStatement: true
            case .simple, .copyOut, .copyIn, .copyInEnded, .sessionReset: false
            }
        }
    }

    /// What follows a carried session reset in its pipeline.
    enum PrefixedWork: Sendable, Equatable {
        /// The reset's sync, then one statement and its sync.
        case statement
        /// The reset's sync, then a statement carrying its deadline.
        case carried(CarriedDeadline)
        /// One statement under the reset's own sync (``PostgresSessionReset``, "grouped"): `resetStatements` of
        /// the reset's statements are still to end before the statement's results begin.
        case grouped(resetStatements: Int)

        /// How the work is read once the reset's part has ended.
        var mode: WireMode {
            switch self {
            case .statement, .grouped: .pipelinedStatement
            case .carried(let carried): .carried(carried)
            }
        }

        /// Whether the reset has a sync of its own (the work behind it then stays in the pipeline after it).
        var isSyncedApart: Bool {
            if case .grouped = self { return false }
            return true
        }
    }

    /// The cancels sent for one query. Kept after they finished, until the next query is sent: it is what
    /// makes that query's `57014` ours.
    struct Cancels: Sendable, Equatable {
        /// The query they were sent for.
        let query: QueryID
        /// Whether any is in flight, and what waits for them wait on.
        var flight: Flight
        /// When the first went out: resends stop at the connection's `cancelTimeout` after it. Kept in a
        /// fixed-layout form (`StoredInstant`), so that the machine's layout is known when it is compiled
        /// (Docs/Decisions/0006).
        let firstAt: StoredInstant
        /// How many were sent again because the query stayed unanswered.
        var resends: Int
    }

    /// Cancels in flight carry the one settlement their waiters wait on: there is none without them, and none of
    /// them without it.
    enum Flight: Sendable, Equatable {
        case settled
        case inFlight(Int, CancelSettlement)
    }

    /// What a wait for the cancels in flight waits on (a cleanup, a close): made when a cancel goes out with none in
    /// flight, set by whoever performs the machine's ``CancelFinishedAction/cancelsSettled(_:)``. A waiting
    /// primitive carried in the state, compared by identity; the machine itself never waits or sets it.
    struct CancelSettlement: Sendable, Equatable {
        let event: OneShotEvent

        static func == (lhs: Self, rhs: Self) -> Bool { lhs.event === rhs.event }
    }

    /// What a resend of a cancel is based on.
    struct ResendBasis: Sendable, Equatable {
        let firstAt: ContinuousClock.Instant
        let resends: Int
        /// Whom to ask before the resend goes out (``resendConsentChanged(_:)``); `nil`: nobody.
        var consent: ResendConsent? = nil
    }

    private(set) var usability: Usability = .usable(Usable())
    /// Who holds the connection: nobody, an operation, or the cleanup a pool runs between leases.
    enum Holder: Sendable, Equatable {
        case nobody
        /// An operation (``begin(carryingReset:)``), which runs the cleanup first when one is owed.
        case operation
        /// The cleanup alone (``beginCleanup()``): what a cancelled lease left, run with no operation behind it.
        case cleanup
    }

    /// Who holds the connection. Independent of the rest: a holder may hold a connection in every state (it
    /// learns that it broke, or that its owner closed it, when it next asks).
    private(set) var holder = Holder.nobody

    /// An operation or a cleanup holds the connection.
    var leased: Bool { holder != .nobody }
    /// The cancels of the query on the wire (or of the last one, while they finish). Independent of
    /// ``usability`` too: cancels sent before a loss or a close still finish.
    private(set) var cancels: Cancels?
    /// The carried deadline of the last query, once its pipeline ended: a `57014` in its results is translated
    /// with it. Cleared when the next query is sent.
    private(set) var lastCarried: CarriedDeadline?
    private var lastQuery: QueryID = 0
    /// Nothing ran on the session since it was opened or since the pool's session reset was sent on its own: a
    /// pool need not reset it again (Docs/Architecture.md, "Clean sessions").
    private(set) var sessionFresh = true
    /// What the server gave the connection to stop its queries with (learned at connect, fixed after it).
    private(set) var backendKey = BackendKey()
    /// The settings this connection asked its session for after it connected (``PostgresSessionOptions``), as
    /// statements: the pool's session reset applies them again (``PostgresSessionReset``).
    private(set) var sessionRestore: [String] = []

    /// The flat view of the wire.
    var wire: Wire {
        switch usability {
        case .broken: .broken
        case .closed: .closed
        case .usable(let usable):
            switch usable.onWire {
            case .idle: .idle
            case .executing(let id, _): .executing(id)
            case .abandoned(let id, _): .abandoned(id)
            }
        }
    }

    /// How the query on the wire is read (``WireMode/simple`` when nothing is).
    var mode: WireMode {
        guard case .usable(let usable) = usability else { return .simple }
        switch usable.onWire {
        case .idle: return .simple
        case .executing(_, let mode), .abandoned(_, let mode): return mode
        }
    }

    /// A rollback is owed before the next operation.
    var needsRollback: Bool {
        if case .usable(let usable) = usability { return usable.owesRollback }
        return false
    }

    /// Cancels sent and not finished yet.
    var cancelsInFlight: Int {
        if case .inFlight(let count, _) = cancels?.flight { return count }
        return 0
    }

    /// One more cancel for `query` went out: the first of a flight opens its settlement. Returns the flight's
    /// settlement.
    @discardableResult
    private mutating func cancelSent(_ query: QueryID, now: ContinuousClock.Instant, resend: Bool = false)
        -> CancelSettlement
    {
        var current =
            cancels.flatMap { $0.query == query ? $0 : nil }
            ?? Cancels(query: query, flight: .settled, firstAt: StoredInstant(now), resends: 0)
        if resend { current.resends += 1 }
        let settlement: CancelSettlement
        switch current.flight {
        case .settled:
            settlement = CancelSettlement(event: OneShotEvent())
            current.flight = .inFlight(1, settlement)
        case .inFlight(let count, let open):
            settlement = open
            current.flight = .inFlight(count + 1, open)
        }
        cancels = current
        return settlement
    }

    /// `true` once the connection can no longer be used.
    var isUnusable: Bool {
        // A pattern, not `==`: the derived equality compares the payloads (Docs/Decisions/0006).
        if case .usable = usability { return false }
        return true
    }

    /// `true` once its owner closed the connection.
    var isClosed: Bool {
        if case .closed = usability { return true }
        return false
    }

    /// `true` when the next operation has cleanup to do first.
    var needsCleanup: Bool {
        guard case .usable(let usable) = usability else { return cancelsInFlight > 0 }
        if case .abandoned = usable.onWire { return true }
        return cancelsInFlight > 0 || usable.owesRollback || usable.owesSessionReset
    }

    /// The pool's session reset is owed and is the only debt: an operation that carries it in front of its
    /// statement (``begin(carryingReset:)``) has nothing to clean up first.
    var onlySessionResetOwed: Bool {
        guard case .usable(let usable) = usability, usable.onWire == .idle else { return false }
        return usable.owesSessionReset && cancelsInFlight == 0 && !usable.owesRollback
    }

    /// The query on the wire, executing or abandoned.
    var queryOnWire: QueryID? {
        switch wire {
        case .executing(let id), .abandoned(let id): id
        case .idle, .broken, .closed: nil
        }
    }

    /// Changes the usable state; a broken or closed connection stays as it is.
    private mutating func ifUsable(_ change: (inout Usable) -> Void) {
        guard case .usable(var usable) = usability else { return }
        change(&usable)
        usability = .usable(usable)
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

    /// An operation wants the connection. `carryingReset`: the operation can carry an owed session reset in front
    /// of its statement (``takeSessionReset()``), so a reset that is the only debt is no cleanup for it.
    mutating func begin(carryingReset: Bool = false) -> BeginAction {
        if isUnusable { return .refuseUnusable }
        if leased { return .refuseBusy }
        holder = .operation
        if carryingReset, onlySessionResetOwed { return .ready }
        return needsCleanup ? .cleanUpFirst : .ready
    }

    /// The owed session reset, taken by the operation that writes it in front of its statement (in the step that
    /// hands both to libpq); `false` when none is owed.
    mutating func takeSessionReset() -> Bool {
        guard case .usable(var usable) = usability, usable.owesSessionReset else { return false }
        usable.owesSessionReset = false
        usability = .usable(usable)
        return true
    }

    /// The operation (or the cleanup) that held the connection is over (its results read, or it left them to
    /// drain).
    mutating func end() {
        holder = .nobody
    }

    enum CleanupStartAction: Sendable, Equatable {
        /// The cleanup holds the connection: run ``nextCleanupStep()`` to `.done`, then ``end()``.
        case cleanUp
        /// Nothing is owed: the connection is clean as it is (and nobody holds it).
        case nothingOwed
        /// Broken or closed.
        case refuseUnusable
        /// An operation or another cleanup holds it.
        case refuseBusy
    }

    /// A pool wants the cleanup of a returned connection run now, with no operation behind it: the connection is
    /// held by the cleanup (``Holder/cleanup``) until ``end()``, so that nothing else starts on it meanwhile.
    mutating func beginCleanup() -> CleanupStartAction {
        if isUnusable { return .refuseUnusable }
        if leased { return .refuseBusy }
        guard needsCleanup else { return .nothingOwed }
        holder = .cleanup
        return .cleanUp
    }

    enum CleanupStep: Sendable, Equatable {
        /// Wait until the cancels in flight finished: until this settlement is set.
        case waitForCancels(CancelSettlement)
        /// Read and discard results until ReadyForQuery.
        case drain(QueryID)
        /// Send `ROLLBACK` (the debt is cleared: a failed rollback breaks the connection).
        case rollback
        /// Send the pool's session reset and read it (the debt is cleared: a failed reset breaks the connection).
        case resetSession
        case done
        /// The connection became unusable.
        case unusable
    }

    /// What the cleanup before the next query does next. The order is asyncpg's guard: the cancel's EOF, then
    /// ReadyForQuery, then the transaction, then the session.
    mutating func nextCleanupStep() -> CleanupStep {
        guard case .usable(var usable) = usability else { return .unusable }
        if case .inFlight(_, let settlement) = cancels?.flight { return .waitForCancels(settlement) }
        if case .abandoned(let id, _) = usable.onWire { return .drain(id) }
        if usable.owesRollback {
            usable.owesRollback = false
            usability = .usable(usable)
            return .rollback
        }
        if usable.owesSessionReset {
            usable.owesSessionReset = false
            usability = .usable(usable)
            return .resetSession
        }
        return .done
    }

    /// A query was handed to libpq (`PQsendQueryParams` succeeded), read as `mode`. Returns its id.
    mutating func sent(mode: WireMode = .simple) -> QueryID {
        precondition(leased && wire == .idle && cancelsInFlight == 0, "send on a connection that is not ready")
        lastQuery += 1
        let id = lastQuery
        ifUsable { $0.onWire = .executing(id, mode) }
        cancels = nil
        lastCarried = nil
        sessionFresh = false
        return id
    }

    /// The pool's session reset was handed to libpq on a round trip of its own, by the cleanup that owed it
    /// (``CleanupStep/resetSession``): on the wire as an abandoned query, which the cleanup's next step drains
    /// (and, if the cleanup is interrupted, the next operation's). Nothing else may be on the wire or owed.
    mutating func sessionResetSent() -> QueryID {
        precondition(leased && wire == .idle && !needsCleanup, "a session reset on a busy connection")
        lastQuery += 1
        let id = lastQuery
        ifUsable { $0.onWire = .abandoned(id, .sessionReset) }
        cancels = nil
        lastCarried = nil
        sessionFresh = true
        return id
    }

    /// The session is as a fresh connection's: the connection's own setup just ended.
    mutating func markSessionFresh() {
        sessionFresh = true
    }

    // MARK: what the connection saw on the wire; the machine decides the mode

    /// The server began a `COPY ... TO STDOUT` (a `PGRES_COPY_OUT` result): copy data follows.
    mutating func copyOutBegan() { enter(.copyOut) }

    /// The server began a `COPY ... FROM STDIN` (a `PGRES_COPY_IN` result): the client owes copy data.
    mutating func copyInBegan() { enter(.copyIn) }

    /// The client's CopyDone or CopyFail was handed to libpq: what is left is to flush it, then read the results.
    /// Only a COPY FROM STDIN in progress moves.
    mutating func copyEndQueued() {
        if mode == .copyIn { enter(.copyInEnded) }
    }

    /// The COPY is over on the client's side (the copy data ended, CopyDone was flushed, or the server ended it
    /// with an error): the rest of the answer is plain results. Only a COPY moves.
    mutating func copyEnded() {
        switch mode {
        case .copyOut, .copyIn, .copyInEnded: enter(.simple)
        default: break
        }
    }

    /// A carried statement's reading moved on (its prelude's answer, its own end): `carried` is where it is.
    mutating func carriedReadingMoved(_ carried: CarriedDeadline) {
        if case .carried = mode { enter(.carried(carried)) }
    }

    /// A pipeline's sync arrived (`PGRES_PIPELINE_SYNC`). A carried reset's sync hands over to the work behind it,
    /// which stays in libpq's pipeline mode; any other sync ends the pipeline. Returns whether the connection
    /// leaves libpq's pipeline mode now (`PQexitPipelineMode`).
    mutating func pipelineSynced() -> Bool {
        if case .resetPrefix(let then) = mode, then.isSyncedApart {
            enter(then.mode)
            return false
        }
        enter(.simple)
        return true
    }

    /// One of a carried reset's statements ended (the NULL after its results). Under one sync with the statement
    /// behind it, the last one hands over to that statement's results.
    mutating func resetStatementEnded() {
        guard case .resetPrefix(.grouped(let left)) = mode else { return }
        enter(left > 1 ? .resetPrefix(then: .grouped(resetStatements: left - 1)) : .pipelinedStatement)
    }

    /// The query on the wire moved to another sub-protocol: only this machine's own events call it.
    private mutating func enter(_ mode: WireMode) {
        ifUsable { usable in
            switch usable.onWire {
            case .idle: break
            case .executing(let id, _): usable.onWire = .executing(id, mode)
            case .abandoned(let id, _): usable.onWire = .abandoned(id, mode)
            }
        }
    }

    /// A carried statement's pipeline reached its sync: the connection is back in its plain mode, and the carried
    /// deadline is kept for the translation of the statement's error.
    mutating func carriedPipelineEnded() {
        if case .carried(let carried) = mode { lastCarried = carried }
        enter(.simple)
    }

    /// The results of `id` ended (ReadyForQuery). Returns whether a `57014` in them is ours.
    mutating func resultsEnded(_ id: QueryID) -> (ended: Bool, ourCancel: Bool) {
        guard queryOnWire == id else { return (false, false) }
        ifUsable { $0.onWire = .idle }
        return (true, cancels?.query == id)
    }

    /// The caller of `id` left before ReadyForQuery (cancelled, a stream was dropped, an error): the query is
    /// abandoned, drained before the next one. `stop`: it left because it was cancelled, so the query must stop on
    /// the server too, and the machine decides whether a cancel goes out for that, as for
    /// ``cancelRequested(_:resend:another:now:)`` (not when the cancellation's own hook already sent one).
    @discardableResult
    mutating func operationLeft(_ id: QueryID, stop: Bool = false, now: ContinuousClock.Instant = .now)
        -> CancelAction
    {
        ifUsable { usable in
            if case .executing(id, let mode) = usable.onWire { usable.onWire = .abandoned(id, mode) }
        }
        return stop ? cancelRequested(id, now: now) : .none
    }

    /// An interrupted transaction must be rolled back before the next operation.
    mutating func requireRollback() {
        ifUsable { $0.owesRollback = true }
    }

    /// The pool's session reset must run (after any rollback) before the next operation.
    mutating func requireSessionReset() {
        ifUsable { $0.owesSessionReset = true }
    }

    // MARK: cancellation

    enum CancelAction: Sendable, Equatable {
        /// Send a cancel for this query, the way the route says.
        case send(QueryID, StopRoute)
        /// Nothing to do: the query already ended, a cancel for it is in flight, or the connection is unusable.
        case none
    }

    /// Someone wants query `id` cancelled, at `now`. `resend` asks again for a query whose earlier cancel
    /// finished without stopping it (a cancel request that reached another server behind a balancer). `another`:
    /// a new cancel for a later statement of the same pipelined batch (shared statements), sent even while one is
    /// in flight (each is counted, and the next operation waits for all of them).
    mutating func cancelRequested(
        _ id: QueryID, resend: Bool = false, another: Bool = false, now: ContinuousClock.Instant
    ) -> CancelAction {
        guard queryOnWire == id else { return .none }
        if cancels?.query == id, !another {
            guard cancelsInFlight == 0, resend else { return .none }
            cancelSent(id, now: now, resend: true)
        } else {
            cancelSent(id, now: now)
        }
        return .send(id, stopRoute())
    }

    /// The route of a stop about to go out. Without a key the stop is the connection's shutdown: it is broken from
    /// here on.
    private mutating func stopRoute() -> StopRoute {
        guard let cancel = backendKey.cancel else {
            lost()
            return .shutDown
        }
        if let identity = backendKey.identity { return .fastPath(identity, orRequest: cancel) }
        return .cancelRequest(cancel)
    }

    enum CancelFinishedAction: Sendable, Equatable {
        /// The last cancel in flight finished: set the settlement, which wakes whoever waits to clean up.
        case cancelsSettled(CancelSettlement)
        case none
    }

    /// A cancel finished (the control statement returned, or the cancel request's socket reached EOF).
    mutating func cancelFinished() -> CancelFinishedAction {
        guard var current = cancels, case .inFlight(let count, let settlement) = current.flight else { return .none }
        current.flight = count > 1 ? .inFlight(count - 1, settlement) : .settled
        cancels = current
        return count > 1 ? .none : .cancelsSettled(settlement)
    }

    /// Whether a resend for `id` makes sense now (it is still on the wire, was cancelled, and nothing is in
    /// flight for it), and what it is based on.
    func resendBasis(_ id: QueryID) -> ResendBasis? {
        guard queryOnWire == id, let cancels, cancels.query == id, cancelsInFlight == 0 else { return nil }
        return ResendBasis(firstAt: cancels.firstAt.instant, resends: cancels.resends, consent: resendConsent)
    }

    /// Who must agree before a cancel that did not stop the query is sent again; `nil`: nobody.
    private(set) var resendConsent: ResendConsent?

    /// A pool's driver of shared statements began (`consent`) or stopped (`nil`) sending on this connection.
    mutating func resendConsentChanged(_ consent: ResendConsent?) {
        resendConsent = consent
    }

    // MARK: failures and the end

    /// The connection was lost, or a step left it in a state nobody can know.
    mutating func lost() {
        if case .closed = usability { return }
        usability = .broken
    }

    enum CloseAction: Sendable, Equatable {
        /// Cancel this query on the server the way the route says, wait for the cancels in flight (bounded) to
        /// settle, then finish.
        case cancelThenFinish(QueryID, StopRoute, CancelSettlement)
        /// Wait for the cancels in flight (bounded) to settle, then finish.
        case settleThenFinish(CancelSettlement)
        case finish
        case alreadyClosed
    }

    /// The owner closes the connection, at `now`.
    mutating func close(now: ContinuousClock.Instant) -> CloseAction {
        if case .closed = usability { return .alreadyClosed }
        // The pool's session reset needs no cancel: closing the session is the end of whatever it changed.
        let onWire = mode == .sessionReset ? nil : queryOnWire
        usability = .closed
        if let onWire, cancels?.query != onWire {
            // Cancels in flight always belong to the query on the wire (a query is sent only when none are), so
            // these are the query's first.
            return .cancelThenFinish(onWire, stopRoute(), cancelSent(onWire, now: now))
        }
        if case .inFlight(_, let settlement) = cancels?.flight { return .settleThenFinish(settlement) }
        return .finish
    }

    // MARK: the backend key

    /// The connection came up: `pid` is `PQbackendPID` (`0`: the server sent no BackendKeyData) and `cancel`
    /// libpq's copy of the key.
    mutating func keyLearned(pid: Int32, cancel: PGCancelPointer?) {
        backendKey = BackendKey(cancel: cancel, pid: pid)
    }

    /// The connection's setup asked the server which backend it is: `identity` when the answer matched the key.
    mutating func backendVerified(_ identity: PostgresBackendIdentity?) {
        backendKey.identity = identity
    }

    /// The connection's setup asked its session for settings of its own (a vanished-client check): `restoring`
    /// are the statements that apply them again after a pool's session reset.
    mutating func sessionSettingsApplied(restoring: [String]) {
        sessionRestore = restoring
    }

    /// The close is finishing the connection: the key to free now, or `nil` when a cancel in flight may still
    /// use it (a frozen server: the key is left to the cancel rather than freed under it). Either way the
    /// connection holds it no more.
    mutating func keyReleased() -> PGCancelPointer? {
        defer { backendKey.cancel = nil }
        return cancelsInFlight == 0 ? backendKey.cancel : nil
    }
}
