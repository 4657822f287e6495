/// What a request to ``MetricsEndpoint`` asked for, decided from its request line alone (pure, tested without
/// sockets).
enum MetricsRoute: Equatable {
    case metrics
    case resources
    case badRequest
    case notFound
    case methodNotAllowed

    /// `requestLine` without its line ending (`GET /metrics HTTP/1.1`).
    init(requestLine: String) {
        let parts = requestLine.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[2].hasPrefix("HTTP/1."), parts[1].hasPrefix("/"), !parts[0].isEmpty,
            parts[0].allSatisfy({ $0.isUppercase })
        else {
            self = .badRequest
            return
        }
        let path = parts[1].split(separator: "?", maxSplits: 1).first.map(String.init) ?? ""
        guard path == "/metrics" || path == "/resources" else {
            self = .notFound
            return
        }
        guard parts[0] == "GET" || parts[0] == "HEAD" else {
            self = .methodNotAllowed
            return
        }
        self = path == "/metrics" ? .metrics : .resources
    }
}
