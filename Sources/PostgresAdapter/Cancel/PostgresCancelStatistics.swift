import ResourceKit

/// Which path each cancel took, counted. A pool shares one among its connections; a connection made alone
/// has its own. The same facts reach the registry's event stream as `postgres.cancel.*` events.
public final class PostgresCancelStatistics: Sendable {
    /// The counts at one instant.
    public struct Snapshot: Sendable, Hashable {
        /// Delivered by `pg_cancel_backend` on a verified control connection (the statement returned `true`).
        public var fastPath = 0
        /// The fast path was tried and did not deliver (`false`, no matching backend, an error, a dead control
        /// connection); the same cancel then went out as a cancel request.
        public var fastPathFellBack = 0
        /// Cancel requests sent (`PQcancel`), first attempts and fallbacks alike.
        public var cancelRequests = 0
        /// Cancels sent again because the query was still unanswered (a balancer sent the first elsewhere).
        public var resends = 0
    }

    enum Path { case fastPath, fastPathFellBack, cancelRequest, resend }

    private let counts = Locked(Snapshot())
    private let changes = Broadcast<Snapshot>()

    public init() {}

    /// The counts now.
    public var snapshot: Snapshot { counts.withLock { $0 } }

    /// The counts now, then after every cancel that took a path: to await a cancel's outcome (which the
    /// control connection reports just after the cancelled task returned) instead of polling ``snapshot``.
    /// The stream ends when its consumer stops iterating.
    public func updates() -> AsyncStream<Snapshot> {
        changes.subscribe(bufferingNewest: 16) { snapshot }
    }

    func record(_ path: Path) {
        let now = counts.withLock { counts in
            switch path {
            case .fastPath: counts.fastPath += 1
            case .fastPathFellBack: counts.fastPathFellBack += 1
            case .cancelRequest: counts.cancelRequests += 1
            case .resend: counts.resends += 1
            }
            return counts
        }
        changes.yield(now)
    }
}
