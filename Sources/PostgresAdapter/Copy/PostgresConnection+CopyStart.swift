import CLibPQ
import ResourceKit

extension PostgresConnection {
    /// Sends a `COPY` statement and waits until the server switched to copy mode `expected`
    /// (`PGRES_COPY_OUT` or `PGRES_COPY_IN`); the machine is then told which COPY began. The caller holds the
    /// connection. Throws the server's error, or `invalidQuery` when `sql` is not the expected kind of COPY
    /// (its results are read to the end, so the connection stays usable).
    func startCopy(_ sql: String, expecting expected: ExecStatusType) async throws -> QueryID {
        let wrongKind = PostgresError(
            .invalidQuery,
            expected == PGRES_COPY_OUT ? "copyOut runs COPY ... TO STDOUT only" : "copyIn runs COPY ... FROM STDIN only"
        )
        let id = try sendSimple(sql, mode: .simple)
        var failure: PostgresError?
        var started = false
        let outcome = try await flushThen(id) {
            try await awaitResults(id, deadline: nil, bindToCaller: true) { result in
                switch PQresultStatus(result) {
                case expected:
                    started = true
                    return true
                case PGRES_FATAL_ERROR:
                    failure = failure ?? .server(result)
                default:
                    failure = failure ?? wrongKind
                }
                return false
            }
        }
        guard started, outcome == .paused else { throw failure ?? wrongKind }
        state.withLock { expected == PGRES_COPY_OUT ? $0.machine.copyOutBegan() : $0.machine.copyInBegan() }
        return id
    }
}
