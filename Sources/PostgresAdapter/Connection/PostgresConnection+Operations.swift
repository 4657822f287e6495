import CLibPQ
import ResourceKit

#if canImport(Glibc)
import Glibc
#endif

/// The wire-level steps every operation shares: acquire, clean up after a cancelled predecessor, send, flush,
/// collect. The state machine decides under `state`'s lock (which also serialises libpq); waits and cancels
/// happen outside it.
extension PostgresConnection {
    typealias QueryID = ConnectionStateMachine.QueryID

    /// Takes the connection for one operation and runs the cleanup its predecessor left (bounded by
    /// ``cancelTimeout``; past it the connection is broken). Pair with ``end()``. `carryingReset`: the operation
    /// writes an owed session reset in front of its statement (``send(_:_:singleRow:carryingReset:)``), so that
    /// debt alone needs no cleanup of its own.
    func begin(carryingReset: Bool = false) async throws {
        let action = state.withLock { $0.machine.begin(carryingReset: carryingReset) }
        switch action {
        case .refuseUnusable:
            throw PostgresError(.connection, "the connection is closed or broken")
        case .refuseBusy:
            throw PostgresError(.connectionBusy, "another operation is running on this connection")
        case .ready:
            return
        case .cleanUpFirst:
            do {
                try await cleanUp()
            } catch {
                end()
                throw error
            }
        }
    }

    func end() {
        state.withLock { $0.machine.end() }
    }

    /// The consumer of a stream on query `id` left before its end (cancelled, stopped iterating, dropped it):
    /// the query is abandoned (drained before the next operation), cancelled on the server, and the connection
    /// released. Non-blocking.
    func leaveStream(_ id: QueryID) {
        let stop = state.withLock { state in
            defer { state.machine.end() }
            return state.machine.operationLeft(id, stop: true)
        }
        if case .send(_, let route) = stop { deliverCancel(id, route) }
    }

    func markBroken() {
        state.withLock { $0.machine.lost() }
    }

    /// Waits for cancels in flight, drains an abandoned query to ReadyForQuery, rolls back an interrupted
    /// transaction, resets the session when the pool owes that, in the state machine's order. The caller holds the
    /// connection (an operation, or the cleanup itself).
    func cleanUp() async throws {
        let deadline = ContinuousClock.now + cancelTimeout
        do {
            while true {
                switch state.withLock({ $0.machine.nextCleanupStep() }) {
                case .done:
                    return
                case .unusable:
                    throw PostgresError(.connection, "the connection is closed or broken")
                case .waitForCancels(let settlement):
                    try await settlement.event.wait(deadline: deadline)
                case .drain(let id):
                    try await drainAbandoned(id, deadline: deadline)
                case .rollback:
                    do {
                        _ = try await sendAndCollect("ROLLBACK", [])
                    } catch let error as PostgresError where error.code != .connection {
                        markBroken()
                        throw error
                    }
                case .resetSession:
                    // On the wire as an abandoned query: the next step drains it, and its error breaks the
                    // connection (``WireMode/sessionReset``).
                    try state.withLock { state in
                        guard Self.sendSessionReset(&state) else {
                            throw PostgresError(.connection, "the connection is closed or broken")
                        }
                    }
                }
            }
        } catch is DeadlineExceededError {
            markBroken()
            handle?.report("postgres.connection.cleanupTimedOut")
            throw PostgresError(.connection, "a cancelled query did not finish in time; the connection was discarded")
        }
    }

    /// Sends one parameterised statement and returns its query id. Under a deadline (and unless the session says
    /// otherwise) the statement carries it to the server as its `statement_timeout` (a stream's single-row
    /// statement does not). `carryingReset`: a session reset the connection owes goes in front of it, in the same
    /// pipeline and the same write (``ConnectionStateMachine/WireMode/resetPrefix(then:)``).
    func send(_ sql: String, _ binds: [PostgresBind], singleRow: Bool, carryingReset: Bool = false) throws -> QueryID {
        try PostgresWireText.check(sql, binds)
        let carry = try singleRow ? nil : deadlineToCarry().map { ($0, try Self.carriedMilliseconds($0)) }
        return try state.withLock { state in
            guard let conn = state.conn, !state.machine.isUnusable else {
                throw PostgresError(.connection, "the connection is closed or broken")
            }
            let carried = carry.map { ConnectionStateMachine.CarriedDeadline(deadline: $0.0) }
            let plan = state.machine.planStatement(carryingReset: carryingReset, carried: carried, singleRow: singleRow)
            switch plan.reset {
            case .underTheStatementsSync(let statements)?:
                // One sync for both: libpq writes them at once, the server answers at once.
                try Self.queueGroupedReset(conn, statements, sql, binds, &state)
                return state.machine.sent(plan)
            case .syncedApart(let statements)?:
                // Two syncs: libpq 15 flushes at each, so the TCP socket is corked around both (one segment).
                conn.cork(true)
                defer { conn.cork(false) }
                try Self.queueSessionReset(conn, statements, &state)
                if let (_, milliseconds) = carry {
                    try Self.sendCarried(conn, sql, binds, milliseconds: milliseconds, &state)
                } else {
                    try Self.queueInPipeline(conn, sql, binds, &state)
                }
                return state.machine.sent(plan)
            case nil:
                break
            }
            if let (_, milliseconds) = carry {
                try Self.sendCarried(conn, sql, binds, milliseconds: milliseconds, &state)
                return state.machine.sent(plan)
            }
            // `withCString`, not the implicit conversion: that copies a short (small-string) statement into a
            // new array on every call, `withCString` onto the stack.
            let sent = sql.withCString { text in
                PostgresWireText.withParameters(binds) { types, values in
                    conn.sendQueryParams(text, Int32(binds.count), types, values, nil, nil, 0)
                }
            }
            guard sent == 1 else {
                let message = conn.errorText
                let lost = conn.status() == CONNECTION_BAD
                if lost { state.machine.lost() }
                throw PostgresError(lost ? .connection : .invalidQuery, message)
            }
            if singleRow { conn.setSingleRowMode() }
            return state.machine.sent(plan)
        }
    }

    /// Sends one statement with the simple query protocol (`COPY` takes no parameters) and returns its id.
    func sendSimple(_ sql: String, mode: WireMode) throws -> QueryID {
        try PostgresWireText.check(sql, [])
        return try state.withLock { state in
            guard let conn = state.conn, !state.machine.isUnusable else {
                throw PostgresError(.connection, "the connection is closed or broken")
            }
            guard conn.sendQuery(sql) == 1 else {
                let message = conn.errorText
                let lost = conn.status() == CONNECTION_BAD
                if lost { state.machine.lost() }
                throw PostgresError(lost ? .connection : .invalidQuery, message)
            }
            return state.machine.sent(mode: mode)
        }
    }

    /// Flushes the send buffer, waiting for writability. The caller is inside ``whileOnWire(_:_:)``, or passes
    /// the query's cancel as `afterCancel` (``collectWithoutOperation(_:_:)``).
    func flush(_ id: QueryID, afterCancel: (@Sendable (CancellationReason) -> Void)? = nil) async throws {
        while true {
            let (pending, socket) = try state.withLock { state -> (Int32, Int32) in
                guard let conn = state.conn else { throw PostgresError(.connection, "the connection was closed") }
                return (conn.flush(), conn.socket)
            }
            if pending == 0 { return }
            if pending < 0 {
                markBroken()
                throw PostgresError(.connection, "could not send the query")
            }
            try await reactor.wait(for: socket, .writable, boundTo: handle, deadline: nil, afterCancel: afterCancel)
        }
    }

    /// Sends `sql`, reads every result until ReadyForQuery and returns the last one (`nil` for none): what
    /// ``execute(_:_:)`` answers, with no array of results built per query. A cancel goes out from inside
    /// `withTaskCancellationHandler`; the caller leaves at once and the results are drained later.
    func sendAndCollect(
        _ sql: String, _ binds: [PostgresBind], carryingReset: Bool = false
    ) async throws -> PostgresResult? {
        let id = try send(sql, binds, singleRow: false, carryingReset: carryingReset)
        var last: PostgresResult?
        var failure: PostgresError?
        try await collectWithoutOperation(id) { cancelQuery in
            let end = try await self.awaitResults(id, deadline: nil, bindToCaller: true, afterCancel: cancelQuery) {
                result in
                switch PQresultStatus(result) {
                case PGRES_TUPLES_OK, PGRES_COMMAND_OK, PGRES_SINGLE_TUPLE, PGRES_EMPTY_QUERY:
                    last = .from(result, reusing: self.recentColumns)
                case PGRES_FATAL_ERROR:
                    failure = failure ?? .server(result)
                default:
                    return true  // COPY (copyOut / copyIn speak it): stop here
                }
                return false
            }
            if end == .paused {
                self.markBroken()
                throw PostgresError.unsupportedResult
            }
            if let failure {
                // 57014 that we caused is our cancellation; one from a carried deadline is that deadline.
                throw self.outcome(of: failure, ourCancel: end == .ended(ourCancel: true))
            }
        }
        return last
    }

    /// Flushes query `id`, then runs `body` (handed the query's cancel, for its waits), with no operation of its
    /// own: every wait of a query is a `CancellationCell` that joins every level of cancellation itself (the
    /// task, the handle, the borrowing scope, an enclosing operation of the caller's), so the query's cancel
    /// rides on each wait instead (``IOReactor``'s `afterCancel`: run on the canceller's thread right after the
    /// wait resumed). A cancel that arrives between two waits stops the next one before it parks, and
    /// ``abandoningOnEarlyExit(_:_:)`` sends the cancel; one that arrives after the last wait leaves the result
    /// standing, as with an operation. Saves a query the operation's object, its lock, its task-local and its
    /// cancellation handler (Docs/Architecture.md, "Three levels of cancellation").
    func collectWithoutOperation<T>(
        _ id: QueryID, _ body: (@escaping @Sendable (CancellationReason) -> Void) async throws -> T
    ) async throws -> T {
        let cancelQuery: @Sendable (CancellationReason) -> Void = { _ in self.requestCancel(id) }
        return try await abandoningOnEarlyExit(id) {
            try await flush(id, afterCancel: cancelQuery)
            return try await body(cancelQuery)
        }
    }

    /// Flushes query `id`, then runs `body`, both inside ``whileOnWire(_:_:)``.
    func flushThen<T>(_ id: QueryID, _ body: () async throws -> T) async throws -> T {
        try await whileOnWire(id) {
            try await flush(id)
            return try await body()
        }
    }

    /// Runs `body` as one ResourceKit operation whose cancellation cancels query `id` on the server: at the
    /// operation level (the task running `body`, which need not own the connection's scope) and at the
    /// resource level alike. When `body` leaves early (cancelled, deadline), the query is marked abandoned: the
    /// next operation drains it.
    func whileOnWire<T>(_ id: QueryID, _ body: () async throws -> T) async throws -> T {
        try await abandoningOnEarlyExit(id) {
            // Not counted: a caller's operation may run several of these (a stream's batches); the public
            // operations count themselves (``countingOperation(_:)``).
            try await withResourceOperation(boundTo: handle, counted: false, onCancel: { _ in self.requestCancel(id) })
            {
                try await body()
            }
        }
    }

    /// Runs one public operation (a statement, a pipeline, a COPY IN) and counts how it ended in
    /// `resourcekit_operations_total{kind="postgres.connection"}`: a carried deadline the server enforced throws
    /// `DeadlineExceededError`, so it counts as `deadline_exceeded`. An unregistered connection counts nothing.
    func countingOperation<T>(_ body: () async throws -> T) async throws -> T {
        do {
            let value = try await body()
            handle?.recordOperation(.completed)
            return value
        } catch {
            handle?.recordOperation(OperationOutcome(error: error))
            throw error
        }
    }

    /// Runs `body`; when it leaves early (cancelled, deadline, an error), query `id` is marked abandoned (the
    /// next operation drains it), a COPY IN is ended, and a cancellation cancels the query on the server.
    func abandoningOnEarlyExit<T>(_ id: QueryID, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch {
            let stop = state.withLock { state in
                defer { Self.abortCopyIn(&state) }
                return state.machine.operationLeft(id, stop: error.isResourceCancellation)
            }
            if case .send(_, let route) = stop { deliverCancel(id, route) }
            throw error
        }
    }

    /// A `COPY ... FROM STDIN` the caller leaves is ended with CopyFail at once (non-blocking: queued, and
    /// flushed as far as the socket takes it), so the server aborts the load without waiting for the
    /// connection's next operation; the cleanup finishes what could not be sent. Under the lock.
    static func abortCopyIn(_ state: inout State) {
        guard state.machine.mode == .copyIn, let conn = state.conn else { return }
        if conn.putCopyEnd("the client cancelled the COPY") == 1 {
            state.machine.copyEndQueued()
            _ = conn.flush()
        }
    }

    enum ResultsEnd: Equatable {
        /// `consume` asked to pause (a stream took one row).
        case paused
        /// ReadyForQuery: the query is over.
        case ended(ourCancel: Bool)
    }

    enum PumpStep {
        case finished(ResultsEnd)
        /// Nothing complete is buffered: wait until this socket is readable. `afterReset`: what was read was a
        /// carried session reset's answer (the server sends it before the statement's), so the wait for the
        /// statement's is a first wait again (``waitForAnswer(_:lookedAgain:bindToCaller:deadline:afterCancel:)``).
        case wait(Int32, afterReset: Bool)
    }

    /// One look without waiting: hands every complete result of query `id` to `consume` until ReadyForQuery,
    /// until `consume` returns `true`, or until libpq needs more input. Reads the socket only when libpq has
    /// nothing complete buffered (one system call per buffer-full of rows, not one per row).
    func pump(_ id: QueryID, consume: (OpaquePointer) -> Bool) throws -> PumpStep {
        let step = try state.withLock { state -> PumpStep in
            guard let conn = state.conn else { throw PostgresError(.connection, "the connection was closed") }
            if conn.isBusy() == 1, conn.consumeInput() == 0 {
                state.machine.lost()
                let message = conn.errorText
                throw PostgresError(.connection, message.isEmpty ? "the connection was lost" : message)
            }
            var inReset = false
            if case .resetPrefix = state.machine.mode { inReset = true }
            while conn.isBusy() == 0 {
                let next = conn.getResult()
                let taken: CarriedStep?
                switch state.machine.mode {
                case .carried: taken = try Self.takeCarried(next, conn, &state)
                case .resetPrefix, .pipelinedStatement: taken = try Self.takePipelined(next, conn, &state)
                default: taken = nil
                }
                if let taken {
                    switch taken {
                    case .taken:
                        if let next { PQclear(next) }
                        continue
                    case .ended:
                        if let next { PQclear(next) }
                        return .finished(.ended(ourCancel: state.machine.resultsEnded(id).ourCancel))
                    case .callers:
                        break
                    }
                }
                guard let result = next else {
                    return .finished(.ended(ourCancel: state.machine.resultsEnded(id).ourCancel))
                }
                defer { PQclear(result) }
                if consume(result) { return .finished(.paused) }
            }
            if inReset, case .resetPrefix = state.machine.mode { return .wait(conn.socket, afterReset: false) }
            return .wait(conn.socket, afterReset: inReset)
        }
        notices.deliver(reportingTo: handle)
        return step
    }

    /// The one collect loop (queries, streams, drains): ``pump(_:consume:)`` until it finishes, parking on the
    /// reactor whenever there is nothing to read.
    ///
    /// - Parameters:
    ///   - bindToCaller: waits end when the resource is cancelled (the caller's operation). A drain is bounded
    ///     by `deadline` instead.
    ///   - afterCancel: runs when a cancel wins while a wait is parked, right after it resumed (see
    ///     ``collectWithoutOperation(_:_:)``).
    func awaitResults(
        _ id: QueryID,
        deadline: ContinuousClock.Instant?,
        bindToCaller: Bool,
        afterCancel: (@Sendable (CancellationReason) -> Void)? = nil,
        consume: (OpaquePointer) -> Bool
    ) async throws -> ResultsEnd {
        var spunOnce = false
        CooperativeLoad.postgres.answersAwaited()
        defer { CooperativeLoad.postgres.answersCollected() }
        while true {
            switch try pump(id, consume: consume) {
            case .finished(let end):
                return end
            case .wait(let socket, let afterReset):
                if afterReset { spunOnce = false }  // the statement's own answer: a first wait
                try await waitForAnswer(
                    socket, lookedAgain: &spunOnce, bindToCaller: bindToCaller, deadline: deadline,
                    afterCancel: afterCancel)
            }
        }
    }
}

extension PostgresError {
    /// A COPY statement sent through `query` or `execute`: the connection is in the COPY sub-protocol, which
    /// only ``PostgresConnection/copyOut(_:)`` and ``PostgresConnection/copyIn(_:from:)`` speak.
    static let unsupportedResult = PostgresError(
        .invalidQuery, "a COPY statement needs copyOut or copyIn, not query or execute")
}
