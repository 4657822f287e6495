import CLibPQ

/// The COPY OUT reads a ``PostgresCopyOutStream`` asks its connection for: the stream never reads the
/// connection's state or calls libpq.
extension PostgresConnection {
    /// What one read of COPY data found.
    enum CopyOutStep {
        case chunk([UInt8])
        /// The data ended right after these rows: the COPY's result is read at the next call.
        case lastChunk([UInt8])
        case wait(Int32)
        case copyDone
    }

    /// Reads the COPY data libpq already holds (reading the socket once if it holds none), without waiting,
    /// under the connection's lock: whole rows up to `chunkSize` bytes, the end of the data, or the socket to
    /// wait on. A failure breaks the connection and throws ``PostgresError`` (`connection`).
    func copyOutStep(chunkSize: Int) throws -> CopyOutStep {
        try state.withLock { state -> CopyOutStep in
            guard let conn = state.conn else {
                throw PostgresError(.connection, "the connection was closed")
            }
            var consumed = false
            var gathered: [UInt8] = []
            while true {
                var buffer: UnsafeMutablePointer<CChar>?
                let count = conn.getCopyData(&buffer, 1)
                if count > 0, let buffer {
                    // Whole rows, as many as libpq already holds, up to the chunk size: one step per
                    // buffer-full, not one per row.
                    gathered.append(contentsOf: UnsafeRawBufferPointer(start: buffer, count: Int(count)))
                    PQfreemem(buffer)
                    if gathered.count >= chunkSize { return .chunk(gathered) }
                    continue
                }
                if count == -1 {
                    state.machine.copyEnded()
                    return gathered.isEmpty ? .copyDone : .lastChunk(gathered)
                }
                if !gathered.isEmpty, count != -2 {
                    return .chunk(gathered)  // a wait comes at the next call
                }
                if count == -2 || consumed {
                    if count == -2 {
                        state.machine.lost()
                        throw PostgresError(.connection, conn.errorText)
                    }
                    return .wait(conn.socket)
                }
                if conn.consumeInput() == 0 {
                    state.machine.lost()
                    throw PostgresError(.connection, conn.errorText)
                }
                consumed = true
            }
        }
    }
}
