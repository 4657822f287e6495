/// A stand-in for swift-metrics' `Counter`: the signatures README's event-sink block calls, doing nothing.
public final class Counter: Sendable {
    public init(label: String, dimensions: [(String, String)] = []) {}

    public func increment() {}
}
