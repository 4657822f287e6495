import CSystemShims

public import ResourceKit
#if canImport(Glibc)
import Glibc
#endif

/// The system calls adapters need, as a small typed Swift API, so that no adapter (ours or a third party's)
/// reaches for the C shim: errno read in one place, `EINTR` retried in one place, `EAGAIN` turned into `nil`
/// in one place. In the shape of swift-system's `valueOrErrno`.
///
/// ```swift
/// // the attempt of a GuardedDescriptor.perform loop: nil means "would block, wait and retry"
/// let sent = try Syscall.nonBlocking("send") { Glibc.send(fd, base, count, Int32(MSG_NOSIGNAL)) }
/// ```
public enum Syscall {
    /// The calling thread's `errno`.
    public static var errno: Int32 { Glibc.errno }

    /// Runs `body`, retrying on `EINTR`, and returns its non-negative result; `-1` becomes `SystemError`.
    /// `retryOnInterrupt: false` for calls that must not be retried.
    public static func value<I: FixedWidthInteger>(
        _ call: String,
        retryOnInterrupt: Bool = true,
        _ body: () -> I
    ) throws(SystemError) -> I {
        while true {
            let result = body()
            if result != -1 { return result }
            let error = errno
            if retryOnInterrupt && error == EINTR { continue }
            throw SystemError(call, errno: error)
        }
    }

    /// Runs a non-blocking call: its result, or `nil` when it would block (`EAGAIN`/`EWOULDBLOCK`), retrying
    /// on `EINTR`; any other failure throws `SystemError` (map it to your adapter's error with its `errno`).
    public static func nonBlocking<I: FixedWidthInteger>(_ call: String, _ body: () -> I) throws(SystemError) -> I? {
        while true {
            let result = body()
            if result != -1 { return result }
            let error = errno
            if error == EINTR { continue }
            if error == EAGAIN || error == EWOULDBLOCK { return nil }
            throw SystemError(call, errno: error)
        }
    }

    /// Closes a descriptor exactly once. `close` is never retried: on Linux the descriptor is released even
    /// when `close` reports `EINTR`, and retrying could close a descriptor another thread just opened.
    public static func close(_ fd: Int32) {
        _ = Glibc.close(fd)
    }

    /// Sets `O_NONBLOCK` on `fd`.
    public static func setNonBlocking(_ fd: Int32) throws(SystemError) {
        _ = try value("fcntl") { rk_set_nonblocking(fd) }
    }

    /// A non-blocking, close-on-exec pipe.
    public static func makeNonBlockingPipe() throws(SystemError) -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        _ = try value("pipe2") { fds.withUnsafeMutableBufferPointer { rk_pipe_nonblocking($0.baseAddress) } }
        return (fds[0], fds[1])
    }

    /// Accepts a connection on a listening socket as a non-blocking, close-on-exec descriptor; `nil` when none
    /// is pending (wait for readability and retry).
    public static func acceptNonBlocking(_ listening: Int32) throws(SystemError) -> Int32? {
        try nonBlocking("accept4") { rk_accept_nonblocking(listening) }
    }

    /// A non-blocking inotify descriptor that becomes readable when the file at `path` grows, changes its
    /// metadata, is deleted or moved: wait on it through ``IOReactor`` to follow a growing file.
    public static func watchFileChanges(path: String) throws(SystemError) -> Int32 {
        try value("inotify_add_watch") { rk_inotify_watch_file(path) }
    }

    /// An `eventfd` (non-blocking, close-on-exec): a descriptor another thread makes readable with
    /// ``signalEventFD(_:)``.
    public static func makeEventFD() throws(SystemError) -> Int32 {
        try value("eventfd") { rk_eventfd_create() }
    }

    /// Makes an `eventfd` readable (adds one to its counter).
    public static func signalEventFD(_ fd: Int32) {
        _ = rk_eventfd_signal(fd)
    }

    /// Sets an integer socket option (`SO_REUSEADDR`, `TCP_NODELAY`, ...).
    public static func setSocketOption(_ fd: Int32, level: Int32, name: Int32, value: Int32) throws(SystemError) {
        var option = value
        _ = try Self.value("setsockopt", retryOnInterrupt: false) {
            setsockopt(fd, level, name, &option, socklen_t(MemoryLayout<Int32>.size))
        }
    }

    /// `SO_LINGER` with a zero timeout: closing the socket then sends a reset (RST) instead of an orderly end.
    public static func setAbortiveClose(_ fd: Int32) throws(SystemError) {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        _ = try value("setsockopt", retryOnInterrupt: false) {
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        }
    }
}
