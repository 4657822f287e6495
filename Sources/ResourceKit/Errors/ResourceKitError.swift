/// An error raised by ResourceKit itself (not by an adapter's resource): an opaque code, a fixed message that
/// never contains user data, and an optional underlying system error.
public struct ResourceKitError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong. Compare against the static members; new codes may be added.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable, Hashable {
            case alreadyRegistered
            case scopeFinished
            case reactorUnavailable
            case descriptorClosed
            case alreadyWaiting
            case notPollable
            case badDescriptor
            case blockingPoolShutDown
            case blockingPoolFull
            case ownerShutDown
            case keyInUse
            case notInScope
            case shutdownIncomplete
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The same resource object was registered twice without being closed in between.
        public static let alreadyRegistered = Code(.alreadyRegistered)
        /// The scope had already finished when something was registered into it.
        public static let scopeFinished = Code(.scopeFinished)
        /// The I/O reactor could not be started (epoll or eventfd failed, usually for lack of descriptors).
        public static let reactorUnavailable = Code(.reactorUnavailable)
        /// The descriptor a waiter was waiting on was closed (or closed and reused) under it.
        public static let descriptorClosed = Code(.descriptorClosed)
        /// Another task is already waiting for the same readiness on the same descriptor.
        public static let alreadyWaiting = Code(.alreadyWaiting)
        /// The descriptor cannot be waited on (a regular file or a directory): use the blocking pool.
        public static let notPollable = Code(.notPollable)
        /// The descriptor number is not open.
        public static let badDescriptor = Code(.badDescriptor)
        /// The blocking pool was shut down.
        public static let blockingPoolShutDown = Code(.blockingPoolShutDown)
        /// The blocking pool's queue is full.
        public static let blockingPoolFull = Code(.blockingPoolFull)
        /// The ``ResourceOwner`` is shutting down or shut down and takes no more work or resources.
        public static let ownerShutDown = Code(.ownerShutDown)
        /// Work with this key is running with a different result type.
        public static let keyInUse = Code(.keyInUse)
        /// The handle to adopt is not a live resource of the given scope (or that scope was cancelled).
        public static let notInScope = Code(.notInScope)
        /// An owner's shutdown ended with work that ignored cancellation still running.
        public static let shutdownIncomplete = Code(.shutdownIncomplete)

        public var description: String { base.rawValue }
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
