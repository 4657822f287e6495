import ResourceKit
import ResourceKitIO
import ResourceKitPrometheus
import SocketAdapter

/// The server's plumbing, all of it: accept (each connection in a scope of its own), a session per connection (its
/// requests in order, the running one cancelled when the client goes), a graceful shutdown, and `/metrics`.
public enum TodoServer {
    /// Serves `service` on `listener` (and `registry`, where the pool counts its connections and queries, on
    /// `metrics`) until `shutdown` has run its course or the calling task is cancelled.
    ///
    /// Cancellation: cancelling the calling task cancels every connection and request (their queries stop on the
    /// server) and returns with `CancellationError`. A shutdown's beginning refuses new connections; requests
    /// running then have its grace, after which they are answered `ERR server shutting down`.
    public static func run(
        _ service: TodoService, on listener: SocketListener, metrics: SocketListener?, shutdown: GracefulShutdown,
        registry: ResourceRegistry = .shared
    ) async throws {
        let configuration = SocketServer.Configuration(shutdown: shutdown)
        try await withThrowingDiscardingTaskGroup { group in
            if let metrics {
                group.addTask {
                    try await MetricsEndpoint.serve(metrics, registry: registry, configuration: configuration)
                }
            }
            try await SocketServer.serve(listener, configuration: configuration) { connection, _ in
                do {
                    _ = try await RequestSession.run(on: connection) {
                        try await $0.readLine(maxLength: 4096)
                    } handle: {
                        line, _ in
                        try await connection.write(try await service.answer(line) + "\n")
                        return true
                    }
                } catch let error as ByteStreamError where error.code == .lineTooLong {
                    try await connection.write("ERR line too long (4096 bytes at most)\n")
                }
            }
        }
    }
}
