import Foundation
import ResourceKit
import ResourceKitObservation
import ResourceKitIO
import ResourceKitPrometheus
import SocketAdapter

/// `serve --metrics HOST:PORT`: a minimal HTTP/1.x endpoint for operators.
///
/// - `GET /metrics`: the registry in the Prometheus text format (``PrometheusExposition``);
/// - `GET /resources`: the live resources as JSON (id, kind, scope path, age, deadline, cancellation state).
///
/// One request per connection (`Connection: close`). Bounded like `serve`: a request line or header over
/// 4 KiB, more than 64 headers, or a malformed request line → 400 and close; another path → 404; another
/// method on a known path → 405; each client is a resource scope that is cancelled 5 s after its accept, so a
/// client that sends nothing (or sends slowly) is closed then; past 64 clients at once, 503.
enum MetricsEndpoint {
    static let maxLine = 4096
    static let maxHeaders = 64
    static let maxClients = 64
    static let requestDeadline: Duration = .seconds(5)

    /// What a request asked for, decided from its request line alone (pure, tested without sockets).
    enum Route: Equatable {
        case metrics
        case resources
        case badRequest
        case notFound
        case methodNotAllowed
    }

    static func route(requestLine: String) -> Route {
        let parts = requestLine.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[2].hasPrefix("HTTP/1."), parts[1].hasPrefix("/"), !parts[0].isEmpty,
            parts[0].allSatisfy({ $0.isUppercase })
        else { return .badRequest }
        let path = parts[1].split(separator: "?", maxSplits: 1).first.map(String.init) ?? ""
        guard path == "/metrics" || path == "/resources" else { return .notFound }
        guard parts[0] == "GET" || parts[0] == "HEAD" else { return .methodNotAllowed }
        return path == "/metrics" ? .metrics : .resources
    }

    /// The response for `route` (status line, headers and body).
    static func response(for route: Route, registry: ResourceRegistry, head: Bool = false) -> String {
        let (status, type, body): (String, String, String)
        switch route {
        case .metrics:
            (status, type, body) = ("200 OK", PrometheusExposition.contentType, registry.prometheusExposition())
        case .resources: (status, type, body) = ("200 OK", "application/json", resourcesJSON(registry.snapshot()))
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

    /// The live resources as a JSON array.
    static func resourcesJSON(_ snapshot: RegistrySnapshot) -> String {
        let now = ContinuousClock.now
        let items: [[String: Any]] = snapshot.live.map { resource in
            var item: [String: Any] = [
                "id": Int(resource.info.id.rawValue),
                "kind": resource.info.kindName,
                "label": resource.info.label,
                "scope": resource.info.scopePath,
                "age_seconds": PrometheusSeconds.of(resource.age),
            ]
            item["deadline_in_seconds"] = resource.info.deadline.map { PrometheusSeconds.of($0 - now) } ?? NSNull()
            switch resource.cancellation {
            case nil: item["cancellation"] = NSNull()
            case .cancelled?: item["cancellation"] = "cancelled"
            case .deadlineExceeded?: item["cancellation"] = "deadline_exceeded"
            }
            return item
        }
        let data =
            (try? JSONSerialization.data(withJSONObject: items, options: [.sortedKeys, .withoutEscapingSlashes]))
            ?? Data("[]".utf8)
        return String(decoding: data, as: UTF8.self) + "\n"
    }

    /// Accepts until cancelled (the `serve` scope ends) or `shutdown` begins, telling `onEvent` when accepting
    /// pauses and resumes.
    static func run(
        _ listener: SocketListener, registry: ResourceRegistry,
        onEvent: @escaping @Sendable (SocketServer.Event) -> Void, shutdown: GracefulShutdown? = nil
    ) async throws {
        let clients = Locked(0)
        try await SocketServer.serve(listener, configuration: .init(onEvent: onEvent, shutdown: shutdown)) {
            connection, scope in
            let admitted = clients.withLock { count -> Bool in
                guard count < maxClients else { return false }
                count += 1
                return true
            }
            defer { if admitted { clients.withLock { $0 -= 1 } } }
            // The client's time starts at its accept: past it, the scope is cancelled and its connection torn down,
            // whatever the client is doing. An error ends this client only (the client went away, or framing was
            // malformed and answered where possible).
            try await withThrowingTaskGroup(of: Void.self) { watchdog in
                watchdog.addTask {
                    try await Task.sleep(for: requestDeadline)
                    scope.cancel()
                }
                let reply =
                    admitted
                    ? try await answer(connection, registry: registry)
                    : """
                    HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: \
                    close\r\n\r\n
                    """
                if let reply {
                    try await connection.write(reply)
                    try await lingeringClose(connection)
                }
                watchdog.cancelAll()
            }
        }
    }

    /// Ends the response with a half-close and reads what the client still sends until its end of stream (at
    /// most 1 MiB; the client's watchdog bounds the time). Closing with unread request bytes in the socket
    /// would make the kernel send a reset, which can destroy the response before the client reads it (a
    /// rejected over-long request, a 503).
    static func lingeringClose(_ connection: SocketConnection) async throws {
        try connection.shutdownWrite()
        var discarded = 0
        while discarded < 1 << 20, let chunk = try await connection.receive(upTo: 65_536) {
            discarded += chunk.count
        }
    }

    /// Reads one request (request line, then headers up to the empty line) and returns the response.
    /// `nil` when the client closed before sending a request line.
    private static func answer(_ connection: SocketConnection, registry: ResourceRegistry) async throws -> String? {
        let requestLine: String?
        do {
            requestLine = try await connection.readLine(maxLength: maxLine)
        } catch let error as ByteStreamError where error.code == .lineTooLong {
            return response(for: .badRequest, registry: registry)
        }
        guard let requestLine else { return nil }
        let route = route(requestLine: requestLine.trimmingCharacters(in: .init(charactersIn: "\r")))
        var headers = 0
        while true {
            let line: String?
            do {
                line = try await connection.readLine(maxLength: maxLine)
            } catch let error as ByteStreamError where error.code == .lineTooLong {
                return response(for: .badRequest, registry: registry)
            }
            guard let line else { break }
            if line.isEmpty || line == "\r" { break }
            headers += 1
            if headers > maxHeaders { return response(for: .badRequest, registry: registry) }
        }
        return response(for: route, registry: registry, head: requestLine.hasPrefix("HEAD "))
    }
}

/// Seconds as a JSON number.
enum PrometheusSeconds {
    static func of(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
