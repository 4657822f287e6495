import CLibPQ
import ResourceKit

/// One statement of a pipeline.
public struct PostgresStatement: Sendable {
    public let sql: String
    public let binds: [PostgresBind]

    /// `sql` with `$1`, `$2`, ... bound to `binds`.
    public init(_ sql: String, _ binds: [any PostgresEncodable] = []) {
        self.sql = sql
        self.binds = binds.map(\.postgresBind)
    }
}

extension PostgresConnection {
    /// Sends `statements` in libpq's pipeline mode, one sync at the end, and returns one result per statement,
    /// in order: all of them cost one round trip instead of one each.
    ///
    /// Errors: as the server does, a statement that fails aborts the rest of the batch up to the sync. The
    /// call does not throw for that: the failed statement's entry is `.failure` with the server's error, and
    /// every later one is `.failure` with ``PostgresError/Code/pipelineAborted``. The batch is one implicit
    /// transaction: statements before the failure are rolled back too unless the batch ran inside an explicit
    /// transaction.
    ///
    /// Cancellation: cancelling the task (or the scope) throws `CancellationError` at once and sends a cancel:
    /// the server stops the statement it is running and skips the rest; the remaining results are drained
    /// before the connection's next operation, and a late cancel never reaches the next batch (the guard of
    /// ``PostgresConnection``). Already-cancelled task: nothing is sent.
    /// - Throws: `CancellationError`, `DeadlineExceededError`, ``PostgresError`` (`connection`,
    ///   `invalidQuery` for a statement libpq refused to queue, `connectionBusy`).
    public func pipeline(_ statements: [PostgresStatement]) async throws -> [Result<PostgresResult, PostgresError>] {
        try await countingOperation { try await runPipeline(statements) }
    }

    private func runPipeline(_ statements: [PostgresStatement]) async throws -> [Result<PostgresResult, PostgresError>]
    {
        try Task.checkCancellation()
        try checkHandleBeforeBegin()
        if statements.isEmpty { return [] }
        try await begin()
        defer { end() }
        try Task.checkCancellation()
        let (id, plan) = try sendPipeline(statements)
        var results: [Result<PostgresResult, PostgresError>] = []
        var current: Result<PostgresResult, PostgresError>?
        var entry = 0  // index into `plan`: which queued item the results being read belong to
        var prepareFailure: PostgresError?  // a run's prepare failed: its first statement reports why
        var ourCancelSeen = false
        try await flushThen(id) {
            var spunOnce = false
            CooperativeLoad.postgres.answersAwaited()
            defer { CooperativeLoad.postgres.answersCollected() }
            while true {
                enum Step {
                    case wait(Int32)
                    case done(Bool)
                }
                let step = try state.withLock { state -> Step in
                    guard let conn = state.conn else {
                        throw PostgresError(.connection, "the connection was closed")
                    }
                    if conn.isBusy() == 1, conn.consumeInput() == 0 {
                        state.machine.lost()
                        throw PostgresError(.connection, conn.errorText)
                    }
                    while conn.isBusy() == 0 {
                        guard let result = conn.getResult() else {
                            // The end of one queued item's results: a statement's go to the caller, a
                            // prepare's are only checked (its failure shows on the statements it serves).
                            if entry < plan.count, let finished = current {
                                switch (plan[entry], finished) {
                                case (.prepare, .failure(let error)):
                                    prepareFailure = error
                                case (.statement, .failure(let error))
                                where error.code == .pipelineAborted && prepareFailure != nil:
                                    results.append(.failure(prepareFailure!))
                                    prepareFailure = nil
                                case (.statement, _):
                                    results.append(finished)
                                case (.prepare, .success):
                                    break
                                }
                            }
                            current = nil
                            entry += 1
                            continue
                        }
                        defer { PQclear(result) }
                        switch PQresultStatus(result) {
                        case PGRES_PIPELINE_SYNC:
                            if state.machine.pipelineSynced(), conn.exitPipelineMode() != 1 {
                                state.machine.lost()
                                throw PostgresError(.connection, "could not leave pipeline mode")
                            }
                            return .done(state.machine.resultsEnded(id).ourCancel)
                        case PGRES_TUPLES_OK, PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
                            if current == nil { current = .success(.from(result, reusing: recentColumns)) }
                        case PGRES_PIPELINE_ABORTED:
                            current = .failure(
                                PostgresError(.pipelineAborted, "skipped: an earlier statement in the pipeline failed"))
                        case PGRES_FATAL_ERROR:
                            current = .failure(.server(result))
                        default:
                            current = .failure(PostgresError(.invalidQuery, "COPY is not offered inside a pipeline"))
                        }
                    }
                    return .wait(conn.socket)
                }
                notices.deliver(reportingTo: handle)
                switch step {
                case .done(let ourCancel):
                    ourCancelSeen = ourCancel
                    return
                case .wait(let socket):
                    try await waitForAnswer(socket, lookedAgain: &spunOnce)
                }
            }
        }
        // 57014 that we caused (a cancel that landed as the batch ended) is our cancellation.
        if ourCancelSeen,
            results.contains(where: { if case .failure(let error) = $0 { error.isQueryCanceled } else { false } })
        {
            throw handle?.cancellationReason?.error ?? CancellationError()
        }
        return results
    }

    /// What was queued, in order: a statement (its results go to the caller) or a prepare (skipped).
    enum PipelineItem: Equatable { case prepare, statement }

    /// Enters pipeline mode, queues every statement and the sync. A run of consecutive statements with the
    /// same SQL is parsed once: the unnamed prepared statement is prepared for the run and each statement only
    /// binds and executes it (the server then plans it once, not once per statement; the unnamed statement
    /// leaves nothing behind in the session). A refused statement breaks the connection (queued items cannot
    /// be taken back).
    private func sendPipeline(_ statements: [PostgresStatement]) throws -> (QueryID, [PipelineItem]) {
        for statement in statements { try PostgresWireText.check(statement.sql, statement.binds) }
        return try state.withLock { state in
            guard let conn = state.conn, !state.machine.isUnusable else {
                throw PostgresError(.connection, "the connection is closed or broken")
            }
            guard conn.enterPipelineMode() == 1 else {
                throw PostgresError(.invalidQuery, conn.errorText)
            }
            var plan: [PipelineItem] = []
            plan.reserveCapacity(statements.count + 1)
            for (index, statement) in statements.enumerated() {
                func same(_ other: Int) -> Bool {
                    other >= 0 && other < statements.count && statements[other].sql == statement.sql
                        && statements[other].binds.map(\.oid) == statement.binds.map(\.oid)
                }
                let startsRun = same(index + 1) && !same(index - 1)
                let inRun = startsRun || same(index - 1)
                let count = Int32(statement.binds.count)
                try PostgresWireText.withParameters(statement.binds) { types, values in
                    if startsRun {
                        guard conn.sendPrepare("", statement.sql, count, types) == 1 else {
                            let message = conn.errorText
                            state.machine.lost()
                            throw PostgresError(
                                conn.status() == CONNECTION_BAD ? .connection : .invalidQuery, message)
                        }
                        plan.append(.prepare)
                    }
                    let queued =
                        inRun
                        ? conn.sendQueryPrepared("", count, values, nil, nil, 0)
                        : conn.sendQueryParams(statement.sql, count, types, values, nil, nil, 0)
                    plan.append(.statement)
                    guard queued == 1 else {
                        let message = conn.errorText
                        // Queued but unsent statements cannot be taken back: the connection's state is unknown.
                        state.machine.lost()
                        throw PostgresError(conn.status() == CONNECTION_BAD ? .connection : .invalidQuery, message)
                    }
                }
            }
            guard conn.pipelineSync() == 1 else {
                state.machine.lost()
                throw PostgresError(.connection, conn.errorText)
            }
            return (state.machine.sent(mode: .pipeline), plan)
        }
    }
}
