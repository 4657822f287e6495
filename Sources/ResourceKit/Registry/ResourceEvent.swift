/// The static facts about a registered resource. Contains no user data: labels and kind names come from
/// adapters, which must keep them free of queries, paths and credentials.
public struct ResourceInfo: Sendable, Hashable {
    public let id: ResourceID
    /// The name of the resource's ``ResourceKind``.
    public let kindName: String
    public let label: String
    public let scopePath: String
    public let acquiredAt: ContinuousClock.Instant
    public let deadline: ContinuousClock.Instant?
}

/// Why a resource counts as leaked.
public enum LeakReason: Sendable, Hashable {
    /// Its handle was released without `close()`.
    case deinitializedWithoutClose
    /// `close()` overran the kind's timeout and was abandoned.
    case closeTimedOut
    /// Its scope ended and the resource was still not closed.
    case unclosedAtScopeEnd
    /// Work handed to a `ResourceOwner` was cancelled at shutdown and still had not stopped when the
    /// owner's watchdog expired. It stays in the registry until it ends.
    case didNotStopAfterCancel
}

/// One lifecycle event, published by the registry and delivered by `registry.events()` and `registry.eventSink`
/// (`ResourceKitObservation`).
public struct ResourceEvent: Sendable {
    /// What happened.
    public enum What: Sendable, Hashable {
        /// Registered in a scope or with the registry.
        case acquired
        /// Cancelled (by the task, the scope, a deadline or explicitly).
        case cancelRequested(CancellationReason)
        /// `close()` returned after this long.
        case closed(Duration)
        /// `close()` threw an error of this type (the message is not kept: it may hold user data).
        case closeFailed(errorType: String)
        /// `close()` overran this timeout.
        case closeTimedOut(Duration)
        /// Leaked, for this reason.
        case leaked(LeakReason)
        /// Registration refused because the scope was already cancelled or finished; the resource was
        /// cancelled and closed at once.
        case rejected
        /// Something the resource's adapter reports (for example which path a Postgres cancel took, or that
        /// the server sent a notice). The name is chosen by the adapter and holds no user data.
        case adapter(String)
    }

    public let resource: ResourceInfo
    public let what: What
    public let at: ContinuousClock.Instant
}
