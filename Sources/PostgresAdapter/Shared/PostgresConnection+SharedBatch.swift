import CLibPQ
import ResourceKit

/// A batch of shared statements on one connection: pipeline mode, one sync per statement, each statement's
/// outcome reported as soon as its sync arrives (Docs/Architecture.md, "Shared statements").
extension PostgresConnection {
    /// Writes the statements `claim` returns (called under the connection's lock, in the step that hands them to
    /// libpq: a statement the pool no longer wants is never written) in libpq's pipeline mode, each followed by its
    /// own sync (so each is its own implicit transaction: one statement's error touches no other), and reports
    /// each outcome to `outcome` (by index, outside the connection's lock) as it arrives; what is reported is
    /// decided by ``SharedBatchLedger`` from the server's word. `sent` gets the batch's query id once it is handed
    /// to libpq, for a cancel. Nothing is written when `claim` returns no statement.
    ///
    /// Runs for the pool's driver, not for a caller: no caller's cancellation reaches it (each statement's caller
    /// cancels its own statement through the pool); its waits end when the connection is closed. A batch that
    /// left a transaction block open is rolled back here, before the statements of the block are reported.
    ///
    /// `resetSession`: the batch carries a session reset the connection owes in front of its statements (same
    /// pipeline, a sync of its own: Docs/Architecture.md, "Clean sessions"), and leaves one owed for whoever uses
    /// the connection next; a carried reset that fails is owed again.
    /// - Throws: ``PostgresError/Code/connection`` when the connection fails, or the server reports a block open
    ///   that no statement's tag opened (the connection is then broken: closing it rolls that block back); the
    ///   statements not reported yet have no outcome.
    func runSharedBatch(
        resetSession: Bool,
        claim: () -> [PostgresStatement],
        sent: (QueryID) -> Void,
        outcome: (Int, Result<PostgresResult, PostgresError>) -> Void
    ) async throws {
        try await begin(carryingReset: resetSession)
        var holding = true
        defer { if holding { end() } }
        guard let (id, count, prefixed) = try sendSharedBatch(claim, carryingReset: resetSession) else { return }
        sent(id)
        try await flush(id)
        CooperativeLoad.postgres.answersAwaited()
        defer { CooperativeLoad.postgres.answersCollected() }
        var index = prefixed ? -1 : 0  // -1: the carried reset's segment
        var current: Result<PostgresResult, PostgresError>?
        var lookedAgain = true  // the driver parks at once: it never holds its thread for a look
        var arrived: [(Int, Result<PostgresResult, PostgresError>)] = []
        var ledger = SharedBatchLedger()
        var atTheEnd: (rollBack: Bool, outcomes: [(Int, Result<PostgresResult, PostgresError>)])?
        while true {
            let socket = try state.withLock { state -> Int32? in
                guard let conn = state.conn else { throw PostgresError(.connection, "the connection was closed") }
                if conn.isBusy() == 1, conn.consumeInput() == 0 {
                    state.machine.lost()
                    throw PostgresError(.connection, conn.errorText)
                }
                while conn.isBusy() == 0 {
                    guard let result = conn.getResult() else { continue }  // the end of a statement's results
                    defer { PQclear(result) }
                    switch PQresultStatus(result) {
                    case _ where index < 0:
                        // The carried reset's segment: its sync hands over to the statements; a failure owes it.
                        let status = PQresultStatus(result)
                        if status == PGRES_PIPELINE_SYNC {
                            index = 0
                        } else if status != PGRES_COMMAND_OK, status != PGRES_TUPLES_OK {
                            state.machine.requireSessionReset()
                        }
                    case PGRES_PIPELINE_SYNC:
                        arrived += ledger.ended(index, current ?? .failure(Self.noResult))
                        current = nil
                        index += 1
                        if index == count {
                            guard conn.exitPipelineMode() == 1 else {
                                state.machine.lost()
                                throw PostgresError(.connection, "could not leave pipeline mode")
                            }
                            // libpq tells the transaction status only when nothing is pending: at the batch's end.
                            switch ledger.batchEnded(sessionIdle: conn.transactionStatus() == PQTRANS_IDLE) {
                            case .unexplained:
                                state.machine.lost()
                                throw Self.transactionLeftOpen
                            case .report(let rollBack, let outcomes):
                                if rollBack { state.machine.requireRollback() }
                                atTheEnd = (rollBack, outcomes)
                            }
                            // The next batch (or lessee) gets a fresh session: it carries the reset, or a cleanup
                            // (after any rollback) runs it.
                            if resetSession { state.machine.requireSessionReset() }
                            _ = state.machine.resultsEnded(id)
                            return nil
                        }
                    case PGRES_TUPLES_OK, PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
                        if current == nil { current = .success(.from(result, reusing: recentColumns)) }
                    case PGRES_FATAL_ERROR:
                        current = .failure(.server(result))
                    case PGRES_PIPELINE_ABORTED:
                        current = .failure(PostgresError(.pipelineAborted, "skipped: the statement's pipeline failed"))
                    default:
                        // COPY is refused before a statement is shared (``SharedStatementRules``); never reached.
                        state.machine.lost()
                        throw PostgresError(.connection, "a shared statement started COPY")
                    }
                }
                return conn.socket
            }
            notices.deliver(reportingTo: handle)
            for (position, result) in arrived { outcome(position, result) }
            arrived.removeAll(keepingCapacity: true)
            guard let socket else { break }
            try await waitForAnswer(socket, lookedAgain: &lookedAgain, bindToCaller: false)
        }
        guard let atTheEnd else { return }
        if atTheEnd.rollBack {
            // The block is rolled back (the connection's cleanup, after the batch's cancels settled) before its
            // statements are told; a rollback that fails breaks the connection, which ends the block all the same.
            end()
            holding = false
            guard await resetForReuse() else {
                for (position, result) in atTheEnd.outcomes { outcome(position, result) }
                throw PostgresError(.connection, "the rollback of a shared statement's transaction block failed")
            }
        }
        for (position, result) in atTheEnd.outcomes { outcome(position, result) }
    }

    /// A shared statement that runs alone on a leased connection (the pool's fast path, or `sharing: .alone`): as
    /// ``execute(_:_:)``, but one that leaves a transaction block open (the server's status after it says so) is
    /// rolled back at once and fails with ``PostgresError/Code/sharedTransactionBlock``.
    func runStandalone(_ statement: PostgresStatement) async throws -> PostgresResult {
        let result =
            try await run(statement.sql, statement.binds) ?? PostgresResult(rows: [], commandTag: "", affectedRows: nil)
        let blockOpen = state.withLock { state -> Bool in
            guard let conn = state.conn else { return false }
            let status = conn.transactionStatus()
            guard status == PQTRANS_INTRANS || status == PQTRANS_INERROR else { return false }
            state.machine.requireRollback()
            return true
        }
        guard blockOpen else { return result }
        // Rolled back before the caller is told (the connection's cleanup; a failed rollback breaks it).
        _ = await resetForReuse()
        throw PostgresError(
            .sharedTransactionBlock,
            "this statement opened a transaction block, which a shared statement may not; the pool rolled it back "
                + "(run transactions in withConnection)")
    }

    static let noResult = PostgresError(.connection, "the server sent no result for the statement")
    static let transactionLeftOpen = PostgresError(
        .connection,
        "the server reported a transaction block open after shared statements that opened none; "
            + "the connection was closed, which rolled it back")

    /// Enters pipeline mode and queues every statement `claim` returns (under the lock), each followed by a sync,
    /// behind the owed session reset when `carryingReset`; returns the query id, the count and whether a reset was
    /// carried, or `nil` when there is nothing to write. A refused statement breaks the connection (queued items
    /// cannot be taken back); the statements were checked before they were queued.
    private func sendSharedBatch(
        _ claim: () -> [PostgresStatement], carryingReset: Bool
    ) throws -> (QueryID, Int, Bool)? {
        try state.withLock { state in
            guard let conn = state.conn, !state.machine.isUnusable else {
                throw PostgresError(.connection, "the connection is closed or broken")
            }
            let statements = claim()
            if statements.isEmpty { return nil }
            let reset = state.machine.planBatchReset(carryingReset: carryingReset)
            if let reset { try Self.queueSessionReset(conn, reset.statements, &state) }
            guard conn.pipelineStatus() == PQ_PIPELINE_ON || conn.enterPipelineMode() == 1 else {
                state.machine.lost()
                throw PostgresError(.connection, conn.errorText)
            }
            for statement in statements {
                let queued = statement.sql.withCString { text in
                    PostgresWireText.withParameters(statement.binds) { types, values in
                        conn.sendQueryParams(text, Int32(statement.binds.count), types, values, nil, nil, 0)
                    }
                }
                guard queued == 1, conn.pipelineSync() == 1 else {
                    let message = conn.errorText
                    state.machine.lost()
                    throw PostgresError(.connection, message)
                }
            }
            return (state.machine.sent(mode: .pipeline), statements.count, reset != nil)
        }
    }
}
