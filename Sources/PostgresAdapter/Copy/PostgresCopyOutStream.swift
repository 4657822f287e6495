import CLibPQ
import ResourceKit

extension PostgresConnection {
    /// Runs `COPY ... TO STDOUT` and returns its data as an `AsyncSequence` of chunks of whole rows (see
    /// ``PostgresCopyOutStream``), read through libpq's non-blocking copy API: memory stays flat however much
    /// there is.
    /// The connection is busy until the stream ends, fails, or is dropped.
    ///
    /// Cancellation: cancelling the consuming task (or the connection's scope) throws `CancellationError` from
    /// the iteration at once and sends a cancel, so the server stops producing; breaking out of the loop (or
    /// dropping the stream) does the same. The rest is drained before the connection's next operation, and the
    /// connection is reusable. Already-cancelled task: nothing is sent.
    /// - Throws: ``PostgresError`` (`invalidQuery` when `sql` is not a `COPY ... TO STDOUT`, `server` for the
    ///   server's errors), `CancellationError`, `DeadlineExceededError`.
    public func copyOut(_ sql: String) async throws -> PostgresCopyOutStream {
        try Task.checkCancellation()
        try handle?.checkCancellation()
        try await begin()
        do {
            try Task.checkCancellation()
            let id = try await startCopy(sql, expecting: PGRES_COPY_OUT)
            return PostgresCopyOutStream(connection: self, id: id)
        } catch {
            end()
            handle?.recordOperation(OperationOutcome(error: error))
            throw error
        }
    }
}

/// The data of a `COPY ... TO STDOUT`, chunk by chunk. Each chunk holds whole rows (in text and CSV formats,
/// lines): as many as had arrived, up to ``chunkSize`` bytes (one row may be larger). Iterate it once.
public final class PostgresCopyOutStream: AsyncSequence, Sendable {
    public typealias Element = [UInt8]

    /// About how many bytes a chunk gathers before it is handed over (64 KiB).
    public static let chunkSize = 65_536

    private let connection: PostgresConnection
    private let id: ConnectionStateMachine.QueryID
    private let finished = Locked(false)
    /// The copy data ended (handed over with the last chunk); the next call reads the COPY's result.
    private let dataEnded = Locked(false)

    init(connection: PostgresConnection, id: ConnectionStateMachine.QueryID) {
        self.connection = connection
        self.id = id
    }

    deinit {
        abandon(.cancelled)
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let stream: PostgresCopyOutStream
        public mutating func next() async throws -> [UInt8]? {
            try await stream.nextChunk()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(stream: self) }

    private func finish() -> Bool {
        finished.withLock { finished in
            defer { finished = true }
            return !finished
        }
    }

    /// Ends the stream early (an error, a cancel, dropped), counted as `outcome` (the COPY is one operation in
    /// `resourcekit_operations_total`).
    private func abandon(_ outcome: OperationOutcome) {
        guard finish() else { return }
        connection.handle?.recordOperation(outcome)
        connection.leaveStream(id)
    }

    func nextChunk() async throws -> [UInt8]? {
        if finished.withLock({ $0 }) { return nil }
        if Task.isCancelled || connection.handle?.isCancelled == true {
            let error = connection.handle?.cancellationReason?.error ?? CancellationError()
            abandon(OperationOutcome(error: error))
            throw error
        }
        if dataEnded.withLock({ $0 }) { return try await finishResults() }
        while true {
            let step: PostgresConnection.CopyOutStep
            do {
                step = try connection.copyOutStep(chunkSize: Self.chunkSize)
            } catch {
                if finish() {
                    connection.handle?.recordOperation(OperationOutcome(error: error))
                    connection.end()
                }
                throw error
            }
            switch step {
            case .chunk(let bytes):
                return bytes
            case .lastChunk(let bytes):
                dataEnded.withLock { $0 = true }
                return bytes
            case .wait(let socket):
                do {
                    _ = try await connection.whileOnWire(id) {
                        try await connection.reactor.wait(for: socket, .readable, boundTo: connection.handle)
                    }
                } catch {
                    abandon(OperationOutcome(error: error))
                    throw error
                }
            case .copyDone:
                return try await finishResults()
            }
        }
    }

    /// After the data: the COPY's own result (`COPY n`, or the error that stopped it).
    private func finishResults() async throws -> [UInt8]? {
        var failure: PostgresError?
        let end: PostgresConnection.ResultsEnd
        do {
            end = try await connection.whileOnWire(id) {
                try await connection.awaitResults(id, deadline: nil, bindToCaller: true) { result in
                    if PQresultStatus(result) == PGRES_FATAL_ERROR { failure = failure ?? .server(result) }
                    return false
                }
            }
        } catch {
            abandon(OperationOutcome(error: error))
            throw error
        }
        guard finish() else { return nil }
        connection.end()
        if let failure {
            let error =
                failure.isQueryCanceled && end == .ended(ourCancel: true)
                ? connection.handle?.cancellationReason?.error ?? CancellationError() : failure
            connection.handle?.recordOperation(OperationOutcome(error: error))
            throw error
        }
        connection.handle?.recordOperation(.completed)
        return nil
    }
}
