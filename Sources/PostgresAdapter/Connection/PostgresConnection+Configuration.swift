public import ResourceKit
public import ResourceKitIO

extension PostgresConnection {
    /// How a connection is made and run: everything ``connect(_:in:configuration:)`` needs besides the server's
    /// address and the owning scope. Every property has a default; set the ones you need:
    ///
    /// ```swift
    /// let connection = try await PostgresConnection.connect(
    ///     conninfo, in: scope, configuration: .init(cancelTimeout: .seconds(2)))
    /// ```
    public struct Configuration: Sendable {
        /// Where the connection is recorded when it has no scope (a scope's own registry wins).
        public var registry: ResourceRegistry
        /// The reactor its waits go through.
        public var reactor: IOReactor
        /// The blocking pool that resolves host names.
        public var blockingPool: BlockingPool
        /// How long `close()` waits for a cancel in flight (a frozen server) before it closes anyway.
        public var cancelTimeout: Duration
        /// Where the connection counts its cancels (a pool's connections share one).
        public var statistics: PostgresCancelStatistics
        /// What the server session is asked for, so that its work ends with the client
        /// (``PostgresSessionOptions``: a vanished-client check, the deadline carried as `statement_timeout`).
        public var session: PostgresSessionOptions
        /// The `connect_timeout` to use when the conninfo sets none (``PostgresPool`` sets its default); `nil`
        /// waits as long as the caller does. A `connect_timeout` in the conninfo always wins.
        public var connectTimeout: Duration?
        /// Receives the server's notices and warnings. `nil`: each becomes a registry event
        /// `postgres.notice.<severity>` and its text is dropped. Never printed.
        public var onNotice: (@Sendable (PostgresNotice) -> Void)?
        /// The vanished-client check is asked for in the startup packet, where a session reset keeps it, rather
        /// than after connect (a pool sets it once the server has shown it takes the setting:
        /// ``StartupSettingsPlan``).
        var asksCheckIntervalAtStartup = false

        /// A configuration with the given values and the defaults for the rest.
        public init(
            registry: ResourceRegistry = .shared,
            reactor: IOReactor = .shared,
            blockingPool: BlockingPool = .shared,
            cancelTimeout: Duration = .seconds(5),
            statistics: PostgresCancelStatistics = PostgresCancelStatistics(),
            session: PostgresSessionOptions = PostgresSessionOptions(),
            connectTimeout: Duration? = nil,
            onNotice: (@Sendable (PostgresNotice) -> Void)? = nil
        ) {
            self.registry = registry
            self.reactor = reactor
            self.blockingPool = blockingPool
            self.cancelTimeout = cancelTimeout
            self.statistics = statistics
            self.session = session
            self.connectTimeout = connectTimeout
            self.onNotice = onNotice
        }
    }
}
