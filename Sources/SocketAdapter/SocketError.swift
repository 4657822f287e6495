import ResourceKit

#if canImport(Glibc)
import Glibc
#endif

/// A socket failure that is not a cancellation: refused, reset, unreachable and so on, with the `errno`.
///
/// Cancellation never appears here: our own cancellation is `CancellationError`, a deadline is
/// `DeadlineExceededError`, and the end of the peer's stream is not an error at all (reads return `nil`).
/// Descriptions name the failed call and the error, not the address.
public struct SocketError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    ///
    /// An opaque code: compare it with the static members (`error.code == .connectionRefused`). New codes may be
    /// added in any release, so a `switch` over codes needs a `default`.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }

        /// Nothing listens at the address (`ECONNREFUSED`).
        public static let connectionRefused = Code("connectionRefused")
        /// The peer reset or aborted the connection (`ECONNRESET`, `ECONNABORTED`).
        public static let connectionReset = Code("connectionReset")
        /// No route to the host or network.
        public static let unreachable = Code("unreachable")
        /// The kernel gave up on the connection (`ETIMEDOUT`).
        public static let timedOut = Code("timedOut")
        /// The local address is taken (`EADDRINUSE`).
        public static let addressInUse = Code("addressInUse")
        /// The local address does not exist here (`EADDRNOTAVAIL`).
        public static let addressNotAvailable = Code("addressNotAvailable")
        /// A write after the peer closed its end (`EPIPE`).
        public static let brokenPipe = Code("brokenPipe")
        /// The host name did not resolve (`errno` holds the `getaddrinfo` error).
        public static let resolutionFailed = Code("resolutionFailed")
        /// The address or port is malformed; nothing was sent.
        public static let invalidAddress = Code("invalidAddress")
        /// The process or the system is out of descriptors (`EMFILE`, `ENFILE`).
        public static let descriptorsExhausted = Code("descriptorsExhausted")
        /// Any other `errno`; see ``errno``.
        public static let other = Code("other")

        /// The code's name, as in `SocketError.connectionRefused`.
        public var description: String { name }
    }

    public let code: Code
    /// The system call that failed, such as `"connect"`.
    public let call: String
    /// `errno`, or the `getaddrinfo` error for resolution failures; 0 when not applicable.
    public let errno: Int32

    public init(_ code: Code, call: String, errno: Int32) {
        self.code = code
        self.call = call
        self.errno = errno
    }

    /// Classifies a failed call by its `errno`.
    public static func from(errno: Int32, call: String) -> SocketError {
        let code: Code
        switch errno {
        case ECONNREFUSED: code = .connectionRefused
        case ECONNRESET, ECONNABORTED: code = .connectionReset
        case ENETUNREACH, EHOSTUNREACH, ENETDOWN: code = .unreachable
        case ETIMEDOUT: code = .timedOut
        case EADDRINUSE: code = .addressInUse
        case EADDRNOTAVAIL: code = .addressNotAvailable
        case EPIPE: code = .brokenPipe
        case EMFILE, ENFILE: code = .descriptorsExhausted
        default: code = .other
        }
        return SocketError(code, call: call, errno: errno)
    }

    public var description: String {
        if errno == 0 || code == .resolutionFailed {
            return "SocketError.\(code) (\(call))"
        }
        return
            "SocketError.\(code): \(call) failed: \(SystemError(call, errno: errno).reason) (errno \(errno))"
    }
}
