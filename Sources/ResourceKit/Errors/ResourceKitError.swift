/// An error raised by ResourceKit itself (not by an adapter's resource): an opaque code, a fixed message that
/// never contains user data, and an optional underlying system error.
public struct ResourceKitError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong. Compare against the static members; new codes may be added.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private let name: String
        /// Codes are declared where their errors are raised: the core's here, the I/O runtime's and the task
        /// patterns' in their modules (`extension ResourceKitError.Code`). The name is the description.
        package init(_ name: String) { self.name = name }

        /// The same resource object was registered twice without being closed in between.
        public static let alreadyRegistered = Code("alreadyRegistered")

        public var description: String { name }
    }

    /// The code.
    public let code: Code
    /// A fixed message (no user data).
    public let message: String
    /// The system error behind it, if any.
    public let underlying: SystemError?

    /// Creates an error.
    public init(_ code: Code, _ message: String, underlying: SystemError? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    public var description: String {
        if let underlying {
            return "ResourceKitError.\(code): \(message) (\(underlying))"
        }
        return "ResourceKitError.\(code): \(message)"
    }

    /// Matches on the code, so `catch let e as ResourceKitError where e == .alreadyRegistered` reads well.
    public static func == (lhs: ResourceKitError, rhs: Code) -> Bool { lhs.code == rhs }
}
