/// A kind of resource and its per-kind policy: the row an adapter adds to the plugin table
/// (``ResourceRegistry/registerKind(_:)``). Counters and latency histograms are kept per kind name.
public struct ResourceKind: Sendable, Hashable, CustomStringConvertible {
    /// A short, stable name, such as `"socket"` or `"postgres.connection"`. Shown in snapshots and events.
    public let name: String
    /// How long ``ManagedResource/close()`` may take before it is abandoned and reported.
    public let closeTimeout: Duration

    /// Creates a kind.
    /// - Parameters:
    ///   - name: a short, stable name; it must not contain user data.
    ///   - closeTimeout: the bound on one `close()`; defaults to 5 seconds.
    public init(name: String, closeTimeout: Duration = .seconds(5)) {
        self.name = name
        self.closeTimeout = closeTimeout
    }

    public var description: String { name }
}
