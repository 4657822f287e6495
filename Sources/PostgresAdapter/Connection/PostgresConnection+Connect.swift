import CLibPQ
public import ResourceKit

extension PostgresConnection {
    /// Connects with libpq's non-blocking API (`PQconnectStartParams` / `PQconnectPoll`) through the reactor.
    ///
    /// - Parameters:
    ///   - conninfo: a conninfo string (`host=... port=... user=...`) or a `postgres://` URL.
    ///   - scope: the owning scope; `nil` registers the connection with `registry` alone, and the caller
    ///     (a pool) must close it.
    /// Cancellation: the connection is registered before the handshake starts, so cancelling the task (or the
    /// scope, or its deadline passing) while connecting stops at once and closes the socket, including against
    /// a server that accepts and never answers.
    /// - Throws: ``PostgresError`` (`invalidConfiguration` for a malformed string, `connection` for failures:
    ///   the message never contains the password), `CancellationError`, `DeadlineExceededError`.
    public static func connect(
        _ conninfo: String,
        in scope: ResourceScope?,
        registry: ResourceRegistry = .shared,
        reactor: IOReactor = .shared,
        pool: BlockingPool = .shared,
        cancelTimeout: Duration = .seconds(5)
    ) async throws -> PostgresConnection {
        try scope?.checkCancellation()
        try Task.checkCancellation()
        let password = try ConnectionInfo.validate(conninfo)
        let raw = ["dbname"].withCStrings { keywords in
            [conninfo].withCStrings { values in PQconnectStartParams(keywords, values, 1) }
        }
        guard let raw else { throw PostgresError(.connection, "out of memory starting a connection") }
        if PQstatus(raw) == CONNECTION_BAD {
            let message = ConnectionInfo.scrub(String(cString: PQerrorMessage(raw)), password: password)
            PQfinish(raw)
            throw PostgresError(.connection, message)
        }
        let connection = PostgresConnection(conn: raw, password: password, reactor: reactor, pool: pool, cancelTimeout: cancelTimeout)
        let handle: ResourceHandle
        if let scope {
            handle = try await scope.register(connection, kind: kind, label: "postgres")
        } else {
            handle = try registry.register(connection, kind: kind, label: "postgres (pooled)")
        }
        connection.attach(handle)
        do {
            try await connection.poll(handle: handle, password: password)
        } catch {
            await handle.close()
            throw error
        }
        return connection
    }

    private func poll(handle: ResourceHandle, password: String?) async throws {
        while true {
            let (status, socket, message) = try state.withLock { state -> (PostgresPollingStatusType, Int32, String?) in
                guard let conn = state.conn else { throw PostgresError(.connection, "the connection was closed") }
                let status = PQconnectPoll(conn.raw)
                state.socket = PQsocket(conn.raw)
                let message = status == PGRES_POLLING_FAILED ? String(cString: PQerrorMessage(conn.raw)) : nil
                if status == PGRES_POLLING_OK {
                    PQsetnonblocking(conn.raw, 1)
                    state.cancel = PQgetCancel(conn.raw).map(PGCancelPointer.init)
                    state.backendPID = PQbackendPID(conn.raw)
                }
                return (status, state.socket, message)
            }
            switch status {
            case PGRES_POLLING_OK:
                return
            case PGRES_POLLING_FAILED:
                throw PostgresError(.connection, ConnectionInfo.scrub(message ?? "connection failed", password: password))
            case PGRES_POLLING_READING:
                try await reactor.wait(for: socket, .readable, boundTo: handle)
            default:
                try await reactor.wait(for: socket, .writable, boundTo: handle)
            }
        }
    }
}

extension Array where Element == String {
    /// NULL-terminated `const char *const *` for libpq.
    func withCStrings<R>(_ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
        let duplicated = map { strdup($0) } + [nil]
        defer { duplicated.forEach { free($0) } }
        return duplicated.map { UnsafePointer($0) }.withUnsafeBufferPointer { body($0.baseAddress!) }
    }
}

#if canImport(Glibc)
import Glibc
#endif
