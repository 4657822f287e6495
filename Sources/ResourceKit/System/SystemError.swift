#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CSystemShims

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
        SystemError(call, errno: rk_errno())
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

/// Syscall helpers in the shape of swift-system's: `-1` becomes a thrown ``SystemError``; `EINTR` is retried
/// unless the call must not be (never retry `close`).
public enum Syscall {
    /// Runs `body`, retrying on `EINTR`, and returns its non-negative result or throws ``SystemError``.
    public static func value<I: FixedWidthInteger>(
        _ call: String,
        retryOnInterrupt: Bool = true,
        _ body: () -> I
    ) throws(SystemError) -> I {
        while true {
            let result = body()
            if result != -1 { return result }
            let error = rk_errno()
            if retryOnInterrupt && error == EINTR { continue }
            throw SystemError(call, errno: error)
        }
    }

    /// Closes a descriptor exactly once. `close` is never retried: on Linux the descriptor is released even
    /// when `close` reports `EINTR`, and retrying could close a descriptor another thread just opened.
    public static func close(_ fd: Int32) {
        _ = Glibc.close(fd)
    }
}
