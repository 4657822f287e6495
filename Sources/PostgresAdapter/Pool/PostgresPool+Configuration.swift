public import ResourceKit

extension PostgresPool {
    /// How a pool runs its connections, for ``PostgresPool`` and ``PostgresShardedPool`` alike (a sharded pool gives
    /// the same configuration to every shard). Every property has a default; set the ones you need:
    ///
    /// ```swift
    /// let pool = try PostgresPool(
    ///     conninfo: url, maxConnections: 8, configuration: .init(connectTimeout: .seconds(3), pipelineDepth: 4))
    /// ```
    public struct Configuration: Sendable {
        /// Where the pool's connections are recorded.
        public var registry: ResourceRegistry
        /// Keep one extra control connection and cancel with `pg_cancel_backend` where that is proven safe (see
        /// ``PostgresCancelChannel``); cancel requests remain the fallback. A sharded pool keeps one per shard.
        public var cancelFastPath: Bool
        /// What each connection's server session is asked for (``PostgresSessionOptions``).
        public var session: PostgresSessionOptions
        /// Bounds each host attempt of an open when the conninfo sets no `connect_timeout` (at least 2 s, as in
        /// libpq), so that a silent server never holds a slot for ever.
        public var connectTimeout: Duration
        /// The most shared statements (``PostgresPool/execute(_:_:)``) sent on one connection at a time (at least 1).
        public var pipelineDepth: Int
        /// Receives every connection's notices (see ``PostgresNotice``); `nil`: each becomes a registry event.
        public var onNotice: (@Sendable (PostgresNotice) -> Void)?

        /// A configuration with the given values and the defaults for the rest.
        public init(
            registry: ResourceRegistry = .shared,
            cancelFastPath: Bool = true,
            session: PostgresSessionOptions = PostgresSessionOptions(),
            connectTimeout: Duration = .seconds(10),
            pipelineDepth: Int = 8,
            onNotice: (@Sendable (PostgresNotice) -> Void)? = nil
        ) {
            self.registry = registry
            self.cancelFastPath = cancelFastPath
            self.session = session
            self.connectTimeout = connectTimeout
            self.pipelineDepth = pipelineDepth
            self.onNotice = onNotice
        }
    }
}
