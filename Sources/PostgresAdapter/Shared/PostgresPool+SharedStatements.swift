import ResourceKit
import Synchronization

/// A shared statement's batch on the wire: the connection and its query, for a cancel.
struct SharedWire: Sendable {
    let connection: PostgresConnection
    let query: ConnectionStateMachine.QueryID
}

extension PostgresPool {
    /// How ``execute(_:_:sharing:)`` runs a statement.
    public enum Sharing: Sendable, Hashable {
        /// Pipelined with other tasks' statements on a shared connection under load (the default of
        /// ``execute(_:_:)``): many statements per round trip, but a statement waits for its batch-mates.
        case pipelined
        /// On a connection of its own, leased as ``withConnection(_:)`` leases one: for a statement known to be
        /// long, which would hold its batch-mates behind it. The same rules and guarantees otherwise.
        case alone
    }

    /// Runs one statement on one of the pool's connections, *shared*: while other tasks' statements are on the
    /// same connection, in libpq's pipeline mode (up to `pipelineDepth` at a time, each with its own sync). Under
    /// load that is many statements per round trip and per server wake-up, where ``withConnection(_:)`` makes one.
    ///
    /// What a shared statement may run: one statement that stands alone. It runs in its own implicit transaction
    /// (committed when it succeeds), and its error touches no other statement. Refused with
    /// ``PostgresError/Code/invalidQuery`` before anything is sent, as an early and clear answer: transaction
    /// control (`BEGIN`, `COMMIT`, `SAVEPOINT`, ...), session state (`SET`, `LISTEN`, `DECLARE`, temporary tables,
    /// ...) and `COPY`; use ``withConnection(_:)`` for those. No guarantee rests on that keyword check: what the
    /// caller is told comes from what the server reports for its statement (Docs/Architecture.md, "Shared
    /// statements"). A statement the server reports as having opened a transaction block (its tag `BEGIN` or
    /// `START TRANSACTION`, however it was spelled) fails with ``PostgresError/Code/sharedTransactionBlock``, and
    /// so does every later statement of its batch, which ran inside that block; the pool rolls the block back
    /// before anyone else uses the connection and before those callers are told.
    ///
    /// What a shared statement may wait for: the statements of its own batch written before it (a batch is
    /// written whole when a connection takes it, and nothing is ever added to a batch on the wire), and a
    /// connection's earlier cancels settling. A statement known to be long should not share: pass
    /// `sharing: .alone` (``execute(_:_:sharing:)``) or use ``withConnection(_:)``.
    ///
    /// A shared statement's deadline is not carried to the server as a `statement_timeout` (it still ends the
    /// call, as a cancel does); one that runs alone carries it, as in ``withConnection(_:)``. A batch whose
    /// connection turns out broken before anything of it was written goes to another connection; one that fails
    /// after it was written fails its statements with ``PostgresError/Code/connection`` (they may or may not have
    /// run).
    ///
    /// Cancellation (the task, its borrowing scope, an enclosing operation, a deadline): the call throws
    /// `CancellationError` (or `DeadlineExceededError`) at once. A statement not yet written (queued, or in a
    /// batch whose connection still waits for an earlier cancel to settle) is never written: it leaves its batch
    /// in the same locked step that would write it. Only a statement already written (handed to libpq's send
    /// buffer) may still run: its outcome is dropped and it is cancelled on the server (a cancel request, or the
    /// fast path) once it is the statement its batch runs, since PostgreSQL cancels whatever the backend runs when
    /// the cancel lands; a statement that ended before the cancel landed stays done. A statement is sent again
    /// only when a cancel this pool sent for an earlier statement of its batch stopped it instead (each such
    /// cancel can stop at most one, up to three resends per statement): its implicit transaction was rolled back
    /// whole, so it runs once (something not transactional, such as `nextval`, may advance twice, as under any
    /// retry). A `57014` from a `statement_timeout` or from someone else's cancel reaches the caller as that
    /// ``PostgresError``. The connection takes its next batch only after every cancel's fate is known.
    /// Already-cancelled task: nothing is sent.
    /// - Throws: `CancellationError`, `DeadlineExceededError`, ``PostgresError`` (`server` with SQLSTATE,
    ///   `invalidQuery`, `sharedTransactionBlock`, `connection`, `connectionTimedOut`, `poolClosed`).
    @discardableResult
    public func execute(_ sql: String, _ binds: [any PostgresEncodable] = []) async throws -> PostgresResult {
        let statement = PostgresStatement(sql, binds)
        try PostgresWireText.check(statement.sql, statement.binds)
        try SharedStatementRules.check(statement.sql)
        if withMachine({ $0.shared.driverCount == 0 }), let connection = try await leaseIfFree() {
            // No driver running and a connection free: the statement runs on it alone, as in `withConnection`.
            CooperativeLoad.postgres.leaseTaken()
            defer {
                CooperativeLoad.postgres.leaseReturned()
                release(connection)
            }
            return try await connection.runStandalone(statement)
        }
        do {
            let result = try await runShared(statement)
            registry.recordOperation(.completed, kind: PostgresConnection.kind)
            return result
        } catch {
            // Counted here: the statement ran on a connection the caller never held.
            registry.recordOperation(OperationOutcome(error: error), kind: PostgresConnection.kind)
            throw error
        }
    }

    /// Queues `statement` for a shared connection's next batch and waits for its result.
    private func runShared(_ statement: PostgresStatement) async throws -> PostgresResult {
        try Task.checkCancellation()
        let call = PoolWaiter(pool: self, id: nextID.add(1, ordering: .relaxed).newValue, kind: .statement)
        let links = CancellationLinks.joinCallersLevels(call)
        defer { links.leave(call) }
        return try await withTaskCancellationHandler {
            try await suspendOnWaiter { submit(call, statement, waiter: $0) }
        } onCancel: {
            call.cancel(.cancelled)
        }
    }

    /// Runs one statement as ``execute(_:_:)`` does, or, with `sharing: .alone`, on a connection of its own (its
    /// batch-mates never wait for it, and it waits for none). Rules, cancellation and errors as
    /// ``execute(_:_:)``; `.alone` waits for a connection as ``withConnection(_:)`` does.
    @discardableResult
    public func execute(
        _ sql: String, _ binds: [any PostgresEncodable] = [], sharing: Sharing
    ) async throws -> PostgresResult {
        switch sharing {
        case .pipelined:
            return try await execute(sql, binds)
        case .alone:
            let statement = PostgresStatement(sql, binds)
            try PostgresWireText.check(statement.sql, statement.binds)
            try SharedStatementRules.check(statement.sql)
            return try await withConnection { try await $0.runStandalone(statement) }
        }
    }

    /// Runs a shared statement and returns its rows. Cancellation and errors as ``execute(_:_:)``.
    public func query(_ sql: String, _ binds: [any PostgresEncodable] = []) async throws -> [PostgresRow] {
        try await execute(sql, binds).rows
    }

    /// Runs a statement as ``execute(_:_:sharing:)`` does and returns its rows.
    public func query(
        _ sql: String, _ binds: [any PostgresEncodable] = [], sharing: Sharing
    ) async throws -> [PostgresRow] {
        try await execute(sql, binds, sharing: sharing).rows
    }

    private func submit(
        _ call: PoolWaiter, _ statement: PostgresStatement, waiter: WaiterContinuation<PostgresResult>
    ) {
        let action = withMachine { machine in
            call.asked.store(true, ordering: .relaxed)  // under the lock, with the submit: a cancel looks now
            return machine.shared.submit(.init(id: call.id, statement: statement, waiter: waiter))
        }
        switch action {
        case .queued:
            return
        case .startDriver(let driver):
            startDriver(driver)
        case .refuseClosed:
            waiter.resume(throwing: PostgresError(.poolClosed, "the pool was shut down"))
        case .cancelled(let reason):
            waiter.resume(throwing: reason.error)
        }
    }

    /// A shared statement's caller was cancelled: see ``execute(_:_:)``.
    func cancelStatement(_ call: PoolWaiter, _ reason: CancellationReason) {
        let action = withMachine { machine in
            machine.shared.cancel(call.id, reason: reason, submitted: call.asked.load(ordering: .relaxed))
        }
        switch action {
        case .resume(let waiter), .resumeOnly(let waiter):
            waiter.resume(throwing: reason.error)
        case .resumeAndCancel(let waiter, let wire):
            waiter.resume(throwing: reason.error)
            wire.connection.requestCancel(wire.query, another: true)
        case .none:
            return
        }
    }

    private func startDriver(_ driver: SharedMachine.DriverID) {
        // Where the work that needs it runs: on the reactor's thread when the caller is there (a sharded pool's
        // shape: the answers then wake that thread, which runs the driver and its callers with no hop), else on
        // the cooperative pool. Measured both ways in the measurement log (Benchmarks/History.md).
        background.start(preferring: reactor.isCurrentThread ? reactor : nil) { await self.drive(driver) }
    }

    /// A driver: leases a connection, sends what is queued in batches until nothing is (or a lessee waits for a
    /// connection of its own), then returns the connection to the pool, which cleans it if a cancel is out.
    private func drive(_ driver: SharedMachine.DriverID) async {
        let connection: PostgresConnection
        do {
            connection = try await lease()
        } catch {
            let failure = error as? PostgresError ?? PostgresError(.connection, "no connection for shared statements")
            for waiter in withMachine({ $0.driverFailed(driver) }) { waiter.resume(throwing: failure) }
            return
        }
        CooperativeLoad.postgres.leaseTaken()
        connection.askBeforeResending { self.withMachine { $0.shared.cancelStillWanted(driver) } }
        defer {
            connection.askBeforeResending(nil)
            CooperativeLoad.postgres.leaseReturned()
            release(connection)
        }
        while true {
            let action = withMachine { $0.takeBatch(driver) }
            switch action {
            case .stop(let replacement):
                if let replacement { startDriver(replacement) }
                return
            case .send:
                let (failure, handedToLibPQ) = await send(on: connection, by: driver)
                if failure != nil, !handedToLibPQ {
                    // Found broken before anything was queued: nothing of the batch was sent; others take it.
                    withMachine { $0.shared.batchNotSent(driver) }
                }
                for waiter in withMachine({ $0.shared.batchEnded(driver) }) {
                    waiter.resume(throwing: failure ?? PostgresConnection.noResult)
                }
                if failure != nil {
                    // The connection is broken (the pool closes it): another driver takes what waits.
                    if let replacement = withMachine({ $0.driverStopped(driver) }) { startDriver(replacement) }
                    return
                }
            }
            // The callers just resumed may run on this thread: let them queue their next statements first.
            await Task.yield()
        }
    }

    /// Sends one batch (what of it is still wanted when it is written) and hands each outcome to its caller;
    /// returns the connection's failure, if any, and whether the batch reached libpq (else none of it was sent).
    private func send(
        on connection: PostgresConnection, by driver: SharedMachine.DriverID
    ) async -> (PostgresError?, handedToLibPQ: Bool) {
        var handedToLibPQ = false
        var written: [SharedMachine.Entry] = []
        do {
            try await connection.runSharedBatch(
                resetSession: session.resetsBetweenUsers,
                claim: {
                    // Under the connection's lock, in the step that hands the statements to libpq: a statement
                    // cancelled before this step is never written.
                    written = withMachine { $0.shared.write(driver) }
                    return written.map(\.statement)
                },
                sent: { query in
                    handedToLibPQ = true
                    let wire = SharedWire(connection: connection, query: query)
                    if withMachine({ $0.shared.batchSent(driver, as: wire) }) {
                        connection.requestCancel(query, another: true)
                    }
                },
                outcome: { index, outcome in
                    let (action, cancel) = withMachine { $0.shared.finished(driver, written[index].id, outcome) }
                    if let cancel { cancel.connection.requestCancel(cancel.query, another: true) }
                    switch action {
                    case .resume(let waiter, let outcome):
                        waiter.resume(with: outcome.mapError { $0 })
                    case .sentAgain(let start):
                        if let start { startDriver(start) }
                    case .none:
                        break
                    }
                })
            return (nil, true)
        } catch let error as PostgresError {
            return (error, handedToLibPQ)
        } catch {
            return (PostgresError(.connection, "the shared statements' connection failed"), handedToLibPQ)
        }
    }
}
