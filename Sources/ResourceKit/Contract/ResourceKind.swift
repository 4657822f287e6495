/// A kind of resource and its per-kind policy: the row an adapter adds to the plugin table
/// (``ResourceRegistry/registerKind(_:)``). Counters and latency histograms are kept per kind name.
///
/// Making a kind looks its name up in a process-wide table once (kinds are usually `static let`s); registries then
/// count by the small number it gets there, with no string hashing per registration or close.
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
        self.index = KindNames.index(of: name)
    }

    /// The name's number in ``KindNames``: the same for every kind of this name in the process.
    let index: Int

    public var description: String { name }
}

/// The process-wide numbering of kind names, so that a registry keeps its per-kind counters in an array. Names are
/// never removed: a process has a handful of kinds, and a registry keeps each kind's counters for its lifetime.
enum KindNames {
    private static let table = Locked([String: Int]())

    /// The number of `name`, assigned on first use.
    static func index(of name: String) -> Int {
        table.withLock { table in
            if let index = table[name] { return index }
            let index = table.count
            table[name] = index
            return index
        }
    }

    /// The number of `name` if a kind of that name was ever made.
    static func existingIndex(of name: String) -> Int? {
        table.withLock { $0[name] }
    }
}
