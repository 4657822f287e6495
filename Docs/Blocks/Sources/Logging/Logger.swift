/// A stand-in for swift-log's `Logger`: the signatures README's event-sink block calls, doing nothing.
public struct Logger: Sendable {
    public typealias Metadata = [String: String]

    public init(label: String) {}

    public func warning(_ message: @autoclosure () -> String, metadata: @autoclosure () -> Metadata? = nil) {}
    public func error(_ message: @autoclosure () -> String, metadata: @autoclosure () -> Metadata? = nil) {}
}
