import CLibPQ
import ResourceKit
import ResourceKitIO

/// Draining a query whose caller left, whatever sub-protocol it was in: plain results, COPY OUT data, a
/// COPY IN the client still owes (ended with CopyFail, so the server aborts it and nothing is committed), or
/// a pipeline up to its sync, the pool's session reset (whose error breaks the connection).
extension PostgresConnection {
    private enum DrainStep {
        case done
        case wait(Int32, IOInterest)
    }

    /// Reads (and where needed ends) query `id` until ReadyForQuery, waiting on the reactor, bounded by
    /// `deadline`. The caller holds the connection.
    func drainAbandoned(_ id: QueryID, deadline: ContinuousClock.Instant) async throws {
        while true {
            let step = try state.withLock { state in try Self.drainStep(id, &state) }
            notices.deliver(reportingTo: handle)
            switch step {
            case .done:
                return
            case .wait(let socket, let interest):
                try await reactor.wait(for: socket, interest, deadline: deadline)
            }
        }
    }

    /// One non-blocking pass; under the lock.
    private static func drainStep(_ id: QueryID, _ state: inout State) throws -> DrainStep {
        guard let conn = state.conn else { throw PostgresError(.connection, "the connection was closed") }
        func lost() -> PostgresError {
            state.machine.lost()
            let message = conn.errorText
            return PostgresError(.connection, message.isEmpty ? "the connection was lost" : message)
        }
        while true {
            switch state.machine.mode {
            case .copyIn:
                let ended = conn.putCopyEnd("the client cancelled the COPY")
                if ended == 0 { return .wait(conn.socket, .writable) }
                if ended < 0 { throw lost() }
                state.machine.copyEndQueued()
            case .copyInEnded:
                let flushed = conn.flush()
                if flushed == 1 { return .wait(conn.socket, .writable) }
                if flushed < 0 { throw lost() }
                state.machine.copyEnded()
            case .copyOut:
                var buffer: UnsafeMutablePointer<CChar>?
                let count = conn.getCopyData(&buffer, 1)
                if let buffer { PQfreemem(buffer) }
                if count > 0 { continue }
                if count == -1 {
                    state.machine.copyEnded()
                    continue
                }
                if count == -2 { throw lost() }
                if conn.consumeInput() == 0 { throw lost() }
                var again: UnsafeMutablePointer<CChar>?
                let retry = conn.getCopyData(&again, 1)
                if let again { PQfreemem(again) }
                if retry == 0 { return .wait(conn.socket, .readable) }
                if retry == -1 { state.machine.copyEnded() }
                if retry == -2 { throw lost() }
            case .simple, .pipeline, .carried, .sessionReset, .resetPrefix, .pipelinedStatement:
                if state.machine.mode == .sessionReset {
                    // Handed to libpq by the cleanup: whatever of it the socket has not taken yet goes out now.
                    let flushed = conn.flush()
                    if flushed == 1 { return .wait(conn.socket, .writable) }
                    if flushed < 0 { throw lost() }
                }
                if conn.isBusy() == 1 {
                    if conn.consumeInput() == 0 { throw lost() }
                    if conn.isBusy() == 1 { return .wait(conn.socket, .readable) }
                }
                let next = conn.getResult()
                switch state.machine.mode {
                case .resetPrefix, .pipelinedStatement:
                    // A carried reset and the statement behind it are read as the caller's pump reads them (a failed
                    // reset is owed again); what the pump would hand to the caller is dropped.
                    let step = try Self.takePipelined(next, conn, &state)
                    if let next { PQclear(next) }
                    guard case .ended = step else { continue }
                    _ = state.machine.resultsEnded(id)
                    return .done
                default:
                    break
                }
                guard let result = next else {
                    if state.machine.mode.isPipeline { continue }  // a NULL separates a pipeline's statements
                    _ = state.machine.resultsEnded(id)
                    return .done
                }
                let status = PQresultStatus(result)
                if status == PGRES_FATAL_ERROR, state.machine.mode == .sessionReset {
                    let failure = PostgresError.server(result)
                    PQclear(result)
                    state.machine.lost()
                    throw PostgresError(
                        .connection,
                        "the pool's session reset failed (\(failure.sqlState ?? "?"): \(failure.message)); "
                            + "the connection was discarded")
                }
                PQclear(result)
                switch status {
                case PGRES_COPY_OUT: state.machine.copyOutBegan()
                case PGRES_COPY_IN: state.machine.copyInBegan()
                case PGRES_PIPELINE_SYNC:
                    // A carried reset's own sync hands over to the work behind it; any other ends the pipeline.
                    guard state.machine.pipelineSynced() else { continue }
                    if conn.exitPipelineMode() != 1 { throw lost() }
                    _ = state.machine.resultsEnded(id)
                    return .done
                default: break
                }
            }
        }
    }
}
