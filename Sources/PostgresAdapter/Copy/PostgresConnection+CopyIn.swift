import CLibPQ
import ResourceKit

extension PostgresConnection {
    /// Runs `COPY ... FROM STDIN`, feeding it the chunks of `source` (COPY text or CSV bytes; chunk boundaries
    /// need not fall on rows) through libpq's non-blocking copy API, with backpressure: when the socket is full
    /// the feeding waits on the reactor. Returns the number of rows the server loaded.
    ///
    /// Cancellation: cancelling the task (or the connection's scope) throws `CancellationError` at once; the
    /// COPY is then ended with CopyFail (`PQputCopyEnd` with a reason) and a cancel is sent, so the server
    /// aborts the load and **nothing is committed**. The connection stays reusable (its next operation
    /// finishes the protocol first). An error in `source` ends the COPY the same way and is rethrown.
    /// - Throws: ``PostgresError`` (`server` for rejected data, with ``PostgresError/context`` and
    ///   ``PostgresError/copyLine`` naming the line; nothing is committed), `CancellationError`,
    ///   `DeadlineExceededError`, or `source`'s error.
    public func copyIn<Source: AsyncSequence>(_ sql: String, from source: Source) async throws -> Int
    where Source.Element == [UInt8] {
        try await countingOperation { try await runCopyIn(sql, from: source) }
    }

    private func runCopyIn<Source: AsyncSequence>(_ sql: String, from source: Source) async throws -> Int
    where Source.Element == [UInt8] {
        try Task.checkCancellation()
        try handle?.checkCancellation()
        try await begin()
        defer { end() }
        try Task.checkCancellation()
        let id = try await startCopy(sql, expecting: PGRES_COPY_IN)
        return try await whileOnWire(id) {
            do {
                var sent = 0
                for try await chunk in source {
                    try Task.checkCancellation()
                    guard try await put(chunk) else { break }  // the server ended the COPY (bad data)
                    sent += 1
                    if sent % 64 == 0 { try readWhileCopying() }
                }
            } catch let error where !error.isResourceCancellation {
                // The source failed: abort the COPY (nothing committed), then report the source's error.
                state.withLock { _ = $0.machine.operationLeft(id) }
                throw error
            }
            try await finishCopy(id)
            return try await copyResult(id)
        }
    }

    /// Queues one chunk, waiting for writability while libpq's buffer is full. `false` when the server
    /// already ended the COPY (its error is read by ``copyResult(_:)``).
    private func put(_ chunk: [UInt8]) async throws -> Bool {
        while true {
            let (queued, socket) = try state.withLock { state -> (Int32, Int32) in
                guard let conn = state.conn else { throw PostgresError(.connection, "the connection was closed") }
                let queued = chunk.withUnsafeBufferPointer { buffer in
                    buffer.withMemoryRebound(to: CChar.self) { conn.putCopyData($0.baseAddress, Int32($0.count)) }
                }
                if queued < 0, conn.status() != CONNECTION_BAD {
                    state.machine.copyEnded()  // the server ended the COPY: what is left is its error
                }
                return (queued, conn.socket)
            }
            if queued == 1 { return true }
            if queued < 0 {
                if isBroken { throw PostgresError(.connection, "the connection was lost during COPY") }
                return false
            }
            try await reactor.wait(for: socket, .writable, boundTo: handle)
        }
    }

    /// Reads what the server sent during the COPY (an error ends it early), without waiting.
    private func readWhileCopying() throws {
        try state.withLock { state in
            guard let conn = state.conn, conn.hasInputWaiting else { return }
            if conn.consumeInput() == 0 {
                state.machine.lost()
                throw PostgresError(.connection, conn.errorText)
            }
        }
        notices.deliver(reportingTo: handle)
    }

    /// CopyDone, then flush, waiting for writability.
    private func finishCopy(_ id: QueryID) async throws {
        while true {
            let (step, socket) = try state.withLock { state -> (Int32, Int32) in
                guard let conn = state.conn else { throw PostgresError(.connection, "the connection was closed") }
                switch state.machine.mode {
                case .copyIn:
                    let ended = conn.putCopyEnd(nil)
                    if ended == 1 { state.machine.copyEndQueued() }
                    return (ended == 1 ? 1 : ended, conn.socket)
                case .copyInEnded:
                    let flushed = conn.flush()
                    if flushed == 0 { state.machine.copyEnded() }
                    return (flushed == 0 ? 2 : (flushed == 1 ? 0 : -1), conn.socket)
                default:
                    return (2, conn.socket)  // the server ended it already
                }
            }
            switch step {
            case 2: return
            case 1: continue
            case 0: try await reactor.wait(for: socket, .writable, boundTo: handle)
            default:
                markBroken()
                throw PostgresError(.connection, "could not end the COPY")
            }
        }
    }

    /// The COPY's result: `COPY n` → n, or the server's error.
    private func copyResult(_ id: QueryID) async throws -> Int {
        var failure: PostgresError?
        var rows = 0
        let end = try await awaitResults(id, deadline: nil, bindToCaller: true) { result in
            switch PQresultStatus(result) {
            case PGRES_COMMAND_OK:
                rows = Int(String(cString: PQcmdTuples(result))) ?? 0
            case PGRES_FATAL_ERROR:
                failure = failure ?? .server(result)
            default:
                break
            }
            return false
        }
        if let failure {
            if failure.isQueryCanceled, end == .ended(ourCancel: true) {
                throw handle?.cancellationReason?.error ?? CancellationError()
            }
            throw failure
        }
        return rows
    }
}
