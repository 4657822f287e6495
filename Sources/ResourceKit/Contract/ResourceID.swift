import Synchronization

/// The identity of one registered resource, unique within the process.
public struct ResourceID: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The raw number; increases with every registration.
    public let rawValue: UInt64

    private static let counter = Atomic<UInt64>(0)

    static func next() -> ResourceID {
        ResourceID(rawValue: counter.add(1, ordering: .relaxed).newValue)
    }

    public static func < (lhs: ResourceID, rhs: ResourceID) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String { "#\(rawValue)" }
}
