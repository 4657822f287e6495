import CLibPQ
import ResourceKit

/// A batch of shared statements on one connection: pipeline mode, one sync per statement, each statement's
/// outcome reported as soon as its sync arrives (Docs/Architecture.md, "Shared statements").
extension PostgresConnection {
    /// Sends `statements` in libpq's pipeline mode, each followed by its own sync (so each is its own implicit
    /// transaction: one statement's error touches no other), and reports each outcome to `outcome` (by index,
    /// outside the connection's lock) as it arrives. `sent` gets the batch's query id once it is handed to libpq,
    /// for a cancel.
    ///
    /// Runs for the pool's driver, not for a caller: no caller's cancellation reaches it (each statement's caller
    /// cancels its own statement through the pool); its waits end when the connection is closed.
    /// - Throws: ``PostgresError/Code/connection`` when the connection fails, or the batch left a transaction open
    ///   (the connection is then broken: closing it rolls that transaction back); the statements not reported yet
    ///   have no outcome.
    func runSharedBatch(
        _ statements: [PostgresStatement],
        sent: (QueryID) -> Void,
        outcome: (Int, Result<PostgresResult, PostgresError>) -> Void
    ) async throws {
        try await begin()
        defer { end() }
        let id = try sendSharedBatch(statements)
        sent(id)
        try await flush(id)
        Self.answersAwaited.add(1, ordering: .relaxed)
        defer { Self.answersAwaited.subtract(1, ordering: .relaxed) }
        var index = 0
        var current: Result<PostgresResult, PostgresError>?
        var lookedAgain = true  // the driver parks at once: it never holds its thread for a look
        var arrived: [(Int, Result<PostgresResult, PostgresError>)] = []
        while true {
            let socket = try state.withLock { state -> Int32? in
                guard let conn = state.conn?.raw else { throw PostgresError(.connection, "the connection was closed") }
                if PQisBusy(conn) == 1, PQconsumeInput(conn) == 0 {
                    state.machine.lost()
                    throw PostgresError(.connection, String(cString: PQerrorMessage(conn)).trimmingSpaces)
                }
                while PQisBusy(conn) == 0 {
                    guard let result = PQgetResult(conn) else { continue }  // the end of a statement's results
                    defer { PQclear(result) }
                    switch PQresultStatus(result) {
                    case PGRES_PIPELINE_SYNC:
                        arrived.append((index, current ?? .failure(Self.noResult)))
                        current = nil
                        index += 1
                        if index == statements.count {
                            guard PQexitPipelineMode(conn) == 1 else {
                                state.machine.lost()
                                throw PostgresError(.connection, "could not leave pipeline mode")
                            }
                            // Only BEGIN or START opens a transaction block, and both are refused before a
                            // statement is shared; checked all the same (libpq tells the status only when nothing
                            // is pending, i.e. at the batch's end).
                            guard PQtransactionStatus(conn) == PQTRANS_IDLE else {
                                state.machine.lost()
                                throw Self.transactionLeftOpen
                            }
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
                return state.socket
            }
            notices.deliver(reportingTo: handle)
            for (position, result) in arrived { outcome(position, result) }
            arrived.removeAll(keepingCapacity: true)
            guard let socket else { return }
            try await waitForAnswer(socket, lookedAgain: &lookedAgain, bindToCaller: false)
        }
    }

    static let noResult = PostgresError(.connection, "the server sent no result for the statement")
    static let transactionLeftOpen = PostgresError(
        .connection, "a shared statement left a transaction open; the connection was closed, which rolled it back")

    /// Enters pipeline mode and queues every statement, each followed by a sync. A refused statement breaks the
    /// connection (queued items cannot be taken back); the statements were checked before they were queued.
    private func sendSharedBatch(_ statements: [PostgresStatement]) throws -> QueryID {
        try state.withLock { state in
            guard let conn = state.conn?.raw, !state.machine.isUnusable else {
                throw PostgresError(.connection, "the connection is closed or broken")
            }
            guard PQenterPipelineMode(conn) == 1 else {
                state.machine.lost()
                throw PostgresError(.connection, String(cString: PQerrorMessage(conn)).trimmingSpaces)
            }
            for statement in statements {
                let queued = statement.sql.withCString { text in
                    PostgresWireText.withParameters(statement.binds) { types, values in
                        PQsendQueryParams(conn, text, Int32(statement.binds.count), types, values, nil, nil, 0)
                    }
                }
                guard queued == 1, PQpipelineSync(conn) == 1 else {
                    let message = String(cString: PQerrorMessage(conn)).trimmingSpaces
                    state.machine.lost()
                    throw PostgresError(.connection, message)
                }
            }
            return state.machine.sent(mode: .pipeline)
        }
    }
}
