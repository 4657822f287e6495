/// Which server a connection reached: what tells two servers apart even when their process ids overlap (two
/// containers, two clusters behind one balancer).
public struct PostgresServerIdentity: Sendable, Hashable, CustomStringConvertible {
    /// `pg_postmaster_start_time()` in microseconds since the Unix epoch.
    public let postmasterStart: Int64
    /// `system_identifier` from `pg_control_system()` (the same on a primary and its physical standbys, which
    /// is why the start time is compared too).
    public let systemIdentifier: String?

    public init(postmasterStart: Int64, systemIdentifier: String?) {
        self.postmasterStart = postmasterStart
        self.systemIdentifier = systemIdentifier
    }

    public var description: String { "server(\(systemIdentifier ?? "?"), started \(postmasterStart))" }
}

/// A backend process as verified when the connection was made: the pid libpq holds (`PQbackendPID`, the key
/// of its cancel requests) equals what the server itself reports (`pg_backend_pid()`), and the backend's
/// start time and its server are recorded.
///
/// A number alone is not an identity (Docs/Architecture.md, "The Postgres adapter"): a pid is recycled, and behind a
/// pooler or a balancer the pid a client holds is a key, not a process. The fast cancel path therefore matches a
/// backend on its pid *and* its start time, on a control connection verified to reach the same server.
public struct PostgresBackendIdentity: Sendable, Hashable, CustomStringConvertible {
    /// The server process id, as `pg_stat_activity.pid` shows it.
    public let pid: Int32
    /// `backend_start` in microseconds since the Unix epoch.
    public let backendStart: Int64
    /// The server the backend runs on.
    public let server: PostgresServerIdentity

    public init(pid: Int32, backendStart: Int64, server: PostgresServerIdentity) {
        self.pid = pid
        self.backendStart = backendStart
        self.server = server
    }

    public var description: String { "backend(pid \(pid), started \(backendStart), \(server))" }

    /// One round trip: what the server says about the backend this statement runs on. `$1` is the pid the
    /// client holds (`PQbackendPID`), `$2` a `client_connection_check_interval` in milliseconds (0: none), set
    /// only when the backend is the client's own (never on a pooler's shared session) and the server has the
    /// setting (PostgreSQL 14 and later); the fifth column says whether it was set.
    static let probe = """
        SELECT pg_backend_pid(), \
        (extract(epoch FROM a.backend_start) * 1000000)::int8, \
        (extract(epoch FROM pg_postmaster_start_time()) * 1000000)::int8, \
        (SELECT system_identifier::text FROM pg_control_system()), \
        CASE WHEN pg_backend_pid() = $1::int4 AND $2::int8 > 0 \
        AND current_setting('server_version_num')::int4 >= 140000 \
        THEN set_config('client_connection_check_interval', $2::int8::text, false) IS NOT NULL \
        ELSE false END \
        FROM pg_stat_get_activity(pg_backend_pid()) AS a
        """

    /// The identity in `row` (a ``probe`` result), if it confirms `keyPID`; `nil` when the pid differs (a
    /// pooler's key, a proxy) or the server withheld a field.
    static func verified(keyPID: Int32, row: PostgresRow) throws -> PostgresBackendIdentity? {
        let pid = try row.decode(Int32?.self, at: 0)
        let backendStart = try row.decode(Int64?.self, at: 1)
        let postmasterStart = try row.decode(Int64?.self, at: 2)
        let systemIdentifier = try row.decode(String?.self, at: 3)
        guard let pid, pid == keyPID, pid != 0, let backendStart, let postmasterStart else { return nil }
        return PostgresBackendIdentity(
            pid: pid,
            backendStart: backendStart,
            server: PostgresServerIdentity(postmasterStart: postmasterStart, systemIdentifier: systemIdentifier)
        )
    }
}
