public import ResourceKit
import ResourceKitIO
public import SocketAdapter

/// A minimal HTTP/1.x endpoint for operators: what a server puts on a second, loopback port.
///
/// - `GET /metrics`: the registry in the Prometheus text format (``PrometheusExposition``);
/// - `GET /resources`: the live resources as JSON (id, kind, label, scope path, age, time to deadline, cancellation
///   state).
///
/// One request per connection (`Connection: close`). Bounded: a request line or header over 4 KiB, more than 64
/// headers, or a malformed request line → 400 and close; another path → 404; another method on a known path → 405;
/// each client is a resource scope cancelled 5 s after its accept, so a client that sends nothing (or sends slowly)
/// is closed then; past 64 clients at once, 503. Accepting is `SocketServer`'s (its backoff out of descriptors,
/// its reserve); the endpoint's clients never take a deadline from the caller's scope.
public enum MetricsEndpoint {
    static let maxLine = 4096
    static let maxHeaders = 64
    static let maxClients = 64
    static let requestDeadline: Duration = .seconds(5)

    /// Serves `registry` on `listener` until the calling task is cancelled or `configuration.shutdown` begins (then
    /// it stops accepting and returns when the requests in flight were answered).
    ///
    /// Cancellation: cancelling the calling task stops accepting and cancels every client's scope (their sockets are
    /// shut down at once); `serve` returns when they ended. The caller's scope deadline does not reach the accept
    /// (`SocketServer.serve(_:configuration:handler:)`).
    /// - Parameters:
    ///   - listener: a listening socket (give it a loopback address: the endpoint has no authentication).
    ///   - registry: what to expose (`.shared` by default).
    ///   - configuration: the accept loop's (events, graceful shutdown, descriptor reserve).
    /// - Throws: what `SocketServer.serve(_:configuration:handler:)` throws: `CancellationError`, or a listener error.
    public static func serve(
        _ listener: SocketListener, registry: ResourceRegistry = .shared,
        configuration: SocketServer.Configuration = .init()
    ) async throws {
        let clients = Locked(0)
        try await SocketServer.serve(listener, configuration: configuration) { connection, scope in
            let admitted = clients.withLock { count -> Bool in
                guard count < maxClients else { return false }
                count += 1
                return true
            }
            defer { if admitted { clients.withLock { $0 -= 1 } } }
            // The client's time starts at its accept: past it, the scope is cancelled and its connection torn down,
            // whatever the client is doing. An error ends this client only.
            try await withThrowingTaskGroup(of: Void.self) { watchdog in
                watchdog.addTask {
                    try await Task.sleep(for: requestDeadline)
                    scope.cancel()
                }
                let reply =
                    admitted
                    ? try await answer(connection, registry: registry)
                    : "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                if let reply {
                    try await connection.write(reply)
                    // Unread request bytes at the close would reset the connection under the response.
                    await connection.endOutputAndDrain(within: requestDeadline)
                }
                watchdog.cancelAll()
            }
        }
    }

    /// Reads one request (request line, then headers up to the empty line) and returns the response. `nil` when the
    /// client closed before sending a request line.
    static func answer(_ connection: SocketConnection, registry: ResourceRegistry) async throws -> String? {
        let requestLine: String?
        do {
            requestLine = try await connection.readLine(maxLength: maxLine)
        } catch let error as ByteStreamError where error.code == .lineTooLong {
            return response(for: .badRequest, registry: registry)
        }
        guard var requestLine else { return nil }
        if requestLine.hasSuffix("\r") { requestLine.removeLast() }
        let route = MetricsRoute(requestLine: requestLine)
        var headers = 0
        while true {
            let line: String?
            do {
                line = try await connection.readLine(maxLength: maxLine)
            } catch let error as ByteStreamError where error.code == .lineTooLong {
                return response(for: .badRequest, registry: registry)
            }
            guard let line, !line.isEmpty, line != "\r" else { break }
            headers += 1
            if headers > maxHeaders { return response(for: .badRequest, registry: registry) }
        }
        return response(for: route, registry: registry, head: requestLine.hasPrefix("HEAD "))
    }

    /// The response for `route` (status line, headers and body).
    static func response(for route: MetricsRoute, registry: ResourceRegistry, head: Bool = false) -> String {
        let (status, type, body): (String, String, String)
        switch route {
        case .metrics:
            (status, type, body) = ("200 OK", PrometheusExposition.contentType, registry.prometheusExposition())
        case .resources:
            (status, type, body) = ("200 OK", "application/json", LiveResourcesJSON.render(registry.snapshot()))
        case .badRequest: (status, type, body) = ("400 Bad Request", "text/plain", "bad request\n")
        case .notFound:
            (status, type, body) = ("404 Not Found", "text/plain", "not found (try /metrics or /resources)\n")
        case .methodNotAllowed: (status, type, body) = ("405 Method Not Allowed", "text/plain", "only GET\n")
        }
        var text =
            "HTTP/1.1 \(status)\r\nContent-Type: \(type)\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n"
        if route == .methodNotAllowed { text += "Allow: GET, HEAD\r\n" }
        return text + "\r\n" + (head ? "" : body)
    }
}
