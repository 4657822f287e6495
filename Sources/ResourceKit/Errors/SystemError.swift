#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A failed system call: its name and `errno`. The description names the call and the error, never the
/// arguments (which may be paths or addresses).
public struct SystemError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The system call that failed, such as `"connect"`.
    public let call: String
    /// The `errno` value.
    public let errno: Int32

    /// Creates an error for `call` with `errno`.
    public init(_ call: String, errno: Int32) {
        self.call = call
        self.errno = errno
    }

    /// The error for `call` with the calling thread's current `errno`.
    public static func current(_ call: String) -> SystemError {
        SystemError(call, errno: Glibc.errno)
    }

    /// The system's text for `errno` (`strerror`).
    public var reason: String {
        guard let text = strerror(errno) else { return "unknown error" }
        return String(validatingCString: text) ?? "unknown error"
    }

    public var description: String {
        "\(call) failed: \(reason) (errno \(errno))"
    }
}
