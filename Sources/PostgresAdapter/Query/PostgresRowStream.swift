import CLibPQ
import ResourceKit

extension PostgresConnection {
    /// Starts a query in single-row mode and returns its rows as an `AsyncSequence`: memory stays flat
    /// however many rows there are. The connection is busy until the stream ends, fails, or is dropped.
    ///
    /// Cancellation: cancelling the consuming task mid-stream throws `CancellationError` from the iteration at
    /// once and sends a cancel request, so the *server* stops producing rows; breaking out of the loop (or
    /// dropping the stream) early does the same. Either way the next operation drains first.
    public func stream(_ sql: String, _ binds: [any PostgresEncodable] = []) async throws -> PostgresRowStream {
        try Task.checkCancellation()
        try handle?.checkCancellation()
        try begin()
        do {
            try await prepare()
            try Task.checkCancellation()
            let id = try send(sql, binds.map(\.postgresBind), singleRow: true)
            let stream = PostgresRowStream(connection: self, id: id)
            try await withTaskCancellationHandler {
                try await flush(handle: handle)
            } onCancel: {
                self.requestCancel(id)
            }
            return stream
        } catch {
            state.withLock { state in
                if state.inFlight != nil { state.needsDrain = true }
            }
            end()
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
    private let id: UInt64
    private let state = Locked(State())

    init(connection: PostgresConnection, id: UInt64) {
        self.connection = connection
        self.id = id
    }

    deinit {
        // Dropped before the end: stop the server and let the next operation drain.
        if !state.withLock({ $0.finished }) {
            abandon()
        }
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let stream: PostgresRowStream
        public mutating func next() async throws -> PostgresRow? {
            try await stream.nextRow()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(stream: self) }

    private enum RowStep {
        case row(PostgresRow)
        case wait(Int32)
        case end(ourCancel: Bool)
    }

    private func finish() -> Bool {
        state.withLock { state in
            defer { state.finished = true }
            return !state.finished
        }
    }

    private func abandon() {
        guard finish() else { return }
        connection.state.withLock { if $0.inFlight == id { $0.needsDrain = true } }
        connection.requestCancel(id)
        connection.end()
    }

    func nextRow() async throws -> PostgresRow? {
        if state.withLock({ $0.finished }) { return nil }
        // While rows keep arriving the loop below never waits, so cancellation is checked on every row too:
        // a consumer cancelled mid-stream stops the server instead of draining millions of rows.
        if Task.isCancelled || connection.handle?.isCancelled == true {
            abandon()
            throw connection.handle?.cancellationReason?.error ?? CancellationError()
        }
        let handle = connection.handle
        let id = self.id
        while true {
            let step: RowStep
            do {
                let cached = state.withLock { $0.columns }
                step = try connection.state.withLock { cstate -> RowStep in
                    // Read from the socket only when libpq has no complete row buffered: one syscall per
                    // buffer-full of rows, not one per row.
                    guard let buffered = cstate.conn?.raw else {
                        throw PostgresError(.connection, "the connection was closed")
                    }
                    let conn = PQisBusy(buffered) == 0 ? buffered : try PostgresConnection.usable(&cstate)
                    while PQisBusy(conn) == 0 {
                        guard let result = PQgetResult(conn) else {
                            cstate.inFlight = nil
                            return .end(ourCancel: cstate.cancelRequested == id)
                        }
                        defer { PQclear(result) }
                        switch PQresultStatus(result) {
                        case PGRES_SINGLE_TUPLE:
                            let columns = cached ?? PostgresRow.columns(of: result)
                            return .row(PostgresRow.row(0, of: result, columns: columns))
                        case PGRES_TUPLES_OK, PGRES_COMMAND_OK:
                            continue
                        case PGRES_FATAL_ERROR:
                            let error = PostgresError.server(result)
                            state.withLock { if $0.failure == nil { $0.failure = error } }
                        default:
                            cstate.broken = true
                            state.withLock { $0.failure = PostgresError(.invalidQuery, "unexpected result in a stream") }
                        }
                    }
                    return .wait(cstate.socket)
                }
            } catch {
                if finish() { connection.end() }
                throw error
            }
            switch step {
            case .row(let row):
                state.withLock { if $0.columns == nil { $0.columns = row.columns } }
                return row
            case .end(let ourCancel):
                guard finish() else { return nil }
                connection.end()
                if let failure = state.withLock({ $0.failure }) {
                    if failure.isQueryCanceled && ourCancel { throw CancellationError() }
                    throw failure
                }
                return nil
            case .wait(let socket):
                do {
                    _ = try await withTaskCancellationHandler {
                        try await connection.reactor.wait(for: socket, .readable, boundTo: handle)
                    } onCancel: {
                        self.connection.requestCancel(id)
                    }
                } catch {
                    abandon()
                    throw error
                }
            }
        }
    }
}
