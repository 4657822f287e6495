/// What a connection asks of its server session so that server-side work never outlives the client that asked for
/// it (Docs/Architecture.md, "Nothing outlives its owner"), even when the client freezes or dies and no cancel can
/// be sent.
public struct PostgresSessionOptions: Sendable, Hashable {
    /// How often the server checks, while a statement runs, that the client is still connected
    /// (`client_connection_check_interval`, PostgreSQL 14 and later). A client process that died (`kill -9`, a
    /// crash) has its statement ended within about this long, instead of when the statement next writes to the
    /// socket. `nil`: not asked. Default 1 s.
    ///
    /// Asked for at connect, in the round trip that verifies the backend, and only on a verified backend: behind
    /// a transaction pooler (an unverified backend) the session is shared with other clients and is left alone,
    /// and a server before 14 is not asked. A ``PostgresPool`` that resets its sessions asks in the startup
    /// packet as well (`options`, after the conninfo's own; not for a conninfo that names a service and sets no
    /// `options`), where it is the session's default and the reset keeps it; a server or pooler that refuses it
    /// there (a server before 14, PgBouncer) fails that one open, and the pool opens again at once without it
    /// and asks after connect from then on (reported as `postgres.pool.startupSettingRefused`). Behind PgBouncer
    /// in transaction mode a killed client's statement runs on (PgBouncer keeps the server connection until the
    /// statement ends): a deadline carried to the server (``carriesDeadlineToServer``) is what bounds it there.
    public var clientCheckInterval: Duration?

    /// A statement run under a deadline (of the connection's scope, or of an enclosing
    /// `withResourceOperation(deadline:)`) also carries it to the server as that statement's `statement_timeout`,
    /// in the same round trip, so that a client that froze or died cannot hold the server past its deadline. The
    /// server's timeout then surfaces as `DeadlineExceededError`; a shorter `statement_timeout` of your own still
    /// applies and stays a ``PostgresError``. Statements without a deadline send nothing extra. Default `true`.
    public var carriesDeadlineToServer: Bool

    /// A ``PostgresPool`` resets each connection's session between users, so that the next lessee of
    /// ``PostgresPool/withConnection(_:)`` and the next batch of shared statements see the session a fresh
    /// connection has, whatever SQL ran before: settings (`SET`, `set_config`) back to the connection's start
    /// (its conninfo's `options` are kept), no prepared statements, cursors, `LISTEN`s, temporary tables or
    /// session advisory locks, the session's own user; this type's own settings are applied again. The reset is
    /// `DISCARD ALL`, owed when a used connection goes back to the pool and carried in front of the next user's
    /// first statement, in the same write (no round trip of its own); a stream, `COPY` or pipeline that comes
    /// first has it run on a round trip before it. Default `true`.
    ///
    /// Statements of one batch of shared statements share a session all the same (Docs/Architecture.md, "Clean
    /// sessions"). Turn it off when you manage your sessions yourself (a lessee that sets up the session it
    /// expects every time), or when no user of the pool changes session state and the reset's cost matters (it is
    /// work on the server and the client for every lease and every shared batch).
    public var resetsBetweenUsers: Bool

    /// The options; the defaults suit a server that is reached directly or through a pooler.
    public init(
        clientCheckInterval: Duration? = .seconds(1), carriesDeadlineToServer: Bool = true,
        resetsBetweenUsers: Bool = true
    ) {
        self.clientCheckInterval = clientCheckInterval
        self.carriesDeadlineToServer = carriesDeadlineToServer
        self.resetsBetweenUsers = resetsBetweenUsers
    }

    /// ``clientCheckInterval`` in whole milliseconds for the server (at least 1; 0 when off).
    var clientCheckIntervalMilliseconds: Int64 {
        guard let interval = clientCheckInterval, interval > .zero else { return 0 }
        let (seconds, attoseconds) = interval.components
        return max(1, seconds * 1_000 + attoseconds / 1_000_000_000_000_000)
    }
}
