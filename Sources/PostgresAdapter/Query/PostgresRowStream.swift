import CLibPQ
import ResourceKit

extension PostgresConnection {
    /// Starts a query in single-row mode and returns its rows as an `AsyncSequence`: memory stays flat
    /// however many rows there are. The connection is busy until the stream ends, fails, or is dropped.
    ///
    /// Cancellation: cancelling the consuming task mid-stream throws `CancellationError` from the iteration at
    /// once and sends a cancel, so the *server* stops producing rows; breaking out of the loop (or dropping
    /// the stream) early does the same. Either way the next operation drains first. Already-cancelled task:
    /// nothing is sent.
    public func stream(_ sql: String, _ binds: [any PostgresEncodable] = []) async throws -> PostgresRowStream {
        try Task.checkCancellation()
        try checkHandleBeforeBegin()
        try await begin()
        do {
            try Task.checkCancellation()
            let id = try send(sql, binds.map(\.postgresBind), singleRow: true)
            try await flushThen(id) {}
            return PostgresRowStream(connection: self, id: id)
        } catch {
            end()
            handle?.recordOperation(OperationOutcome(error: error))
            throw error
        }
    }
}

/// The rows of a streaming query. Iterate it once.
public final class PostgresRowStream: AsyncSequence, Sendable {
    public typealias Element = PostgresRow

    private struct State: Sendable {
        var finished = false
        var failure: PostgresError?
        /// Column names and types, read from the first row and shared by the rest.
        var columns: PostgresColumns?
    }

    private let connection: PostgresConnection
    private let id: ConnectionStateMachine.QueryID
    private let state = Locked(State())

    init(connection: PostgresConnection, id: ConnectionStateMachine.QueryID) {
        self.connection = connection
        self.id = id
    }

    deinit {
        // Dropped before the end: stop the server and let the next operation drain.
        abandon(.cancelled)
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let stream: PostgresRowStream
        public mutating func next() async throws -> PostgresRow? {
            try await stream.nextRow()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(stream: self) }

    /// Marks the stream finished; `true` for the first caller, who releases the connection.
    private func finish() -> Bool {
        state.withLock { state in
            defer { state.finished = true }
            return !state.finished
        }
    }

    /// Ends the stream early (an error, a cancel, dropped), counted as `outcome` (the stream is one operation in
    /// `resourcekit_operations_total`, however many rows it took).
    private func abandon(_ outcome: OperationOutcome) {
        guard finish() else { return }
        connection.handle?.recordOperation(outcome)
        connection.leaveStream(id)
    }

    func nextRow() async throws -> PostgresRow? {
        if state.withLock({ $0.finished }) { return nil }
        // While rows keep arriving the loop never waits, so cancellation is checked on every row too: a
        // consumer cancelled mid-stream stops the server instead of draining millions of rows.
        if Task.isCancelled || connection.handle?.isCancelled == true {
            let error = connection.handle?.cancellationReason?.error ?? CancellationError()
            abandon(OperationOutcome(error: error))
            throw error
        }
        var taker = RowTaker(cached: state.withLock { $0.columns })
        let end: PostgresConnection.ResultsEnd
        do {
            // A row already buffered costs no wait and no cancellation handler; only a wait needs them.
            switch try connection.pump(id, consume: { taker.take($0) }) {
            case .finished(let finished):
                end = finished
            case .wait:
                (end, taker) = try await waitForResults(taker)
            }
        } catch {
            abandon(OperationOutcome(error: error))
            throw error
        }
        if let failure = taker.failure { state.withLock { if $0.failure == nil { $0.failure = failure } } }
        switch end {
        case .paused:
            if taker.unsupported {
                connection.markBroken()
                if finish() {
                    connection.handle?.recordOperation(.failed)
                    connection.end()
                }
                throw PostgresError(.invalidQuery, "unexpected result in a stream")
            }
            if taker.cached == nil, let columns = taker.row?.columns { state.withLock { $0.columns = columns } }
            return taker.row
        case .ended(let ourCancel):
            guard finish() else { return nil }
            connection.end()
            if let failure = state.withLock({ $0.failure }) {
                let error =
                    failure.isQueryCanceled && ourCancel
                    ? connection.handle?.cancellationReason?.error ?? CancellationError() : failure
                connection.handle?.recordOperation(OperationOutcome(error: error))
                throw error
            }
            connection.handle?.recordOperation(.completed)
            return nil
        }
    }

    /// The slow path: nothing is buffered, so wait (inside the query's cancellation handler).
    private func waitForResults(_ start: RowTaker) async throws -> (PostgresConnection.ResultsEnd, RowTaker) {
        var taker = start
        let end = try await connection.whileOnWire(id) {
            try await connection.awaitResults(id, deadline: nil, bindToCaller: true, consume: { taker.take($0) })
        }
        return (end, taker)
    }
}

/// What one `nextRow` took from libpq's results: the row, a server error, or a result kind streams do not
/// offer.
private struct RowTaker {
    let cached: PostgresColumns?
    var row: PostgresRow?
    var failure: PostgresError?
    var unsupported = false

    init(cached: PostgresColumns?) {
        self.cached = cached
    }

    /// Returns `true` to stop after this result (a row was taken, or the stream cannot go on).
    mutating func take(_ result: OpaquePointer) -> Bool {
        switch PQresultStatus(result) {
        case PGRES_SINGLE_TUPLE:
            row = PostgresRow.row(0, of: result, columns: cached ?? PostgresRow.columns(of: result))
            return true
        case PGRES_TUPLES_OK, PGRES_COMMAND_OK:
            return false
        case PGRES_FATAL_ERROR:
            failure = failure ?? PostgresError.server(result)
            return false
        default:
            unsupported = true
            return true
        }
    }
}
