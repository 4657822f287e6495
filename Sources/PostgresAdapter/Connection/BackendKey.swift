/// What the server gave a connection to stop its queries with: learned at connect, fixed after it, and held by the
/// connection's state machine, which picks the way each stop travels from it (Docs/Architecture.md, "The Postgres
/// adapter").
struct BackendKey: Sendable, Equatable {
    /// libpq's copy of BackendKeyData; `nil` when the server (or a proxy) sent none, or once the close freed it.
    var cancel: PGCancelPointer?
    /// `PQbackendPID`: the pid the key carries, a real process id only when ``identity`` says so; `0` when the
    /// server sent no BackendKeyData.
    var pid: Int32 = 0
    /// The backend as verified at connect (`pg_backend_pid()` matches the key, the server is known): the fast
    /// path may stop its queries.
    var identity: PostgresBackendIdentity?
}

/// How one stop of a query travels to the server, as the connection's state machine decided it.
enum StopRoute: Sendable, Equatable {
    /// `pg_cancel_backend` on a control connection, when one verified on the backend's server is free; if none
    /// is, or it does not deliver, a cancel request with the key.
    case fastPath(PostgresBackendIdentity, orRequest: PGCancelPointer)
    /// A cancel request (`PQcancel`: a new connection carrying the key), which every pooler and balancer
    /// forwards to where the key is valid.
    case cancelRequest(PGCancelPointer)
    /// No key (some proxies strip BackendKeyData): the connection is shut down, and broken; the server notices the
    /// vanished client within its check interval and stops the query.
    case shutDown
}
