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
    public enum Code: String, Sendable, Hashable {
        case connectionRefused
        case connectionReset
        case unreachable
        case timedOut
        case addressInUse
        case addressNotAvailable
        case brokenPipe
        case resolutionFailed
        case invalidAddress
        case other
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
        default: code = .other
        }
        return SocketError(code, call: call, errno: errno)
    }

    public var description: String {
        if errno == 0 || code == .resolutionFailed {
            return "SocketError.\(code.rawValue) (\(call))"
        }
        return
            "SocketError.\(code.rawValue): \(call) failed: \(SystemError(call, errno: errno).reason) (errno \(errno))"
    }
}
