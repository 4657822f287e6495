import CSystemShims
import Foundation

public import ResourceKit
public import ResourceKitIO
#if canImport(Glibc)
import Glibc
#endif

/// What a spawned child's standard input, output or error is connected to.
public enum ChildStream: Sendable, Hashable {
    /// The parent's own descriptor.
    case inherit
    /// `/dev/null`.
    case nullDevice
    /// A file, created if missing (mode 0644), appended to or truncated. Prefer a file to a pipe for a daemon
    /// (`pg_ctl start`): a pipe inherited by a process that outlives the command is never closed.
    case file(String, truncate: Bool = false)
    /// An open descriptor of the parent (a pipe end), duplicated into place. The parent still owns it and
    /// closes its copy after the spawn; make the parent's other ends close-on-exec.
    case descriptor(Int32)
    /// Standard error only: wherever standard output goes.
    case standardOutput
}

extension Syscall {
    /// Starts a child process (`arguments[0]` is a path, or a name looked up on `PATH`).
    ///
    /// The child starts with no signal blocked and every signal at its default disposition. The concurrency
    /// runtime's threads block signals, and a child would inherit that mask: a `SIGTERM` sent to it later would
    /// then do nothing. Every spawner in the package goes through here for that reason.
    ///
    /// The child inherits **no descriptor** but its standard input, output and error: every other one is closed
    /// before the program starts, close-on-exec or not, so that a server started inside a host process never holds
    /// the host's sockets, locks or pipes (a lock file held by an orphaned child blocks whoever waits on it). Hand
    /// a child a pipe end through `standardInput`, `standardOutput` or `standardError`.
    ///
    /// - Parameters:
    ///   - arguments: the program and its arguments.
    ///   - environment: the child's whole environment; `nil` passes the parent's.
    ///   - standardInput: what the child reads (default `/dev/null`).
    ///   - standardOutput: where the child writes (default the parent's).
    ///   - standardError: where the child's errors go (default the parent's).
    ///   - diesWithParent: the child is killed (`SIGKILL`) when this process ends, by any signal, `kill -9`
    ///     included (Linux's parent-death signal, armed from a thread of ResourceKit's that lives as long as the
    ///     process). The kernel clears it when the child changes its user or group (`setpriv`, `runuser`, a
    ///     set-user-ID program): such a child needs a watcher of its own, as `EmbeddedPostgres` has. A child
    ///     whose program forks a daemon and exits (`pg_ctl start`) passes nothing on to the daemon.
    /// - Returns: the child's pid. Reap it with ``waitForExit(_:)`` (blocking: from the blocking pool).
    /// - Throws: ``SystemError`` (`spawn`) with the reason, for example `ENOENT` for a missing program.
    public static func spawn(
        _ arguments: [String],
        environment: [String: String]? = nil,
        standardInput: ChildStream = .nullDevice,
        standardOutput: ChildStream = .inherit,
        standardError: ChildStream = .inherit,
        diesWithParent: Bool = false
    ) throws(SystemError) -> Int32 {
        guard let first = arguments.first, !first.isEmpty else { throw SystemError("spawn", errno: EINVAL) }
        let environmentEntries = environment.map { $0.map { "\($0.key)=\($0.value)" } } ?? inheritedEnvironment()
        let path = try resolve(first, searchPath: pathVariable(environment))
        // Descriptors for the child's 0, 1, 2, opened here (close-on-exec) and closed after the spawn.
        var opened: [Int32] = []
        defer { opened.forEach { Glibc.close($0) } }
        func source(_ stream: ChildStream, for target: Int32) throws(SystemError) -> Int32 {
            switch stream {
            case .inherit:
                return -1
            case .nullDevice:
                let fd = try value("open") { open("/dev/null", (target == 0 ? O_RDONLY : O_WRONLY) | O_CLOEXEC) }
                opened.append(fd)
                return fd
            case .file(let file, let truncate):
                let flags = O_WRONLY | O_CREAT | O_CLOEXEC | (truncate ? O_TRUNC : O_APPEND)
                let fd = try value("open") { open(file, flags, 0o644) }
                opened.append(fd)
                return fd
            case .descriptor(let fd):
                return fd
            case .standardOutput:
                return 1
            }
        }
        let input = try source(standardInput, for: 0)
        let output = try source(standardOutput, for: 1)
        // "Wherever standard output goes": the same source as the child's 1.
        let error = standardError == .standardOutput ? (output >= 0 ? output : 1) : try source(standardError, for: 2)
        let fds: [Int32] = [input, output, error]
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let envp: [UnsafeMutablePointer<CChar>?] = environmentEntries.map { strdup($0) } + [nil]
        defer { envp.forEach { free($0) } }
        let start = { () -> (Int32, Int32) in
            var pid: Int32 = 0
            let result = fds.withUnsafeBufferPointer { fds in
                rk_spawn(path, argv, envp, fds.baseAddress, diesWithParent ? rk_SIGKILL : 0, &pid)
            }
            return (result, pid)
        }
        let (result, pid) = diesWithParent ? SpawnerThread.shared.perform(start) : start()
        guard result == 0 else { throw SystemError("spawn", errno: result) }
        return pid
    }

    /// The process's own environment as `NAME=value` entries.
    private static func inheritedEnvironment() -> [String] {
        var entries: [String] = []
        var cursor = environ
        while let entry = cursor.pointee {
            entries.append(String(cString: entry))
            cursor += 1
        }
        return entries
    }

    /// `PATH` from `environment` (the child's) if given, else the process's own.
    private static func pathVariable(_ environment: [String: String]?) -> String {
        if let environment { return environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin" }
        return getenv("PATH").map { String(cString: $0) } ?? "/usr/local/bin:/usr/bin:/bin"
    }

    /// `program` itself when it names a path, else the first executable of that name on `searchPath` (resolved
    /// here, not in the child, which makes system calls only).
    private static func resolve(_ program: String, searchPath: String) throws(SystemError) -> String {
        if program.contains("/") { return program }
        for directory in searchPath.split(separator: ":") {
            let candidate = (directory.isEmpty ? "." : String(directory)) + "/" + program
            if access(candidate, X_OK) == 0 { return candidate }
        }
        throw SystemError("spawn", errno: ENOENT)
    }

    /// Waits for the child `pid` to exit (blocking: call it on the ``BlockingPool``, never on the cooperative
    /// pool) and returns its status: the exit code, or 128 + the signal that ended it. Retries `EINTR`.
    public static func waitForExit(_ pid: Int32) throws(SystemError) -> Int32 {
        var status: Int32 = 0
        _ = try value("waitpid") { waitpid(pid, &status, 0) }
        return exitCode(status)
    }

    /// The child's status if it has exited (and reaps it), `nil` while it runs. Never blocks.
    public static func exitStatusIfExited(_ pid: Int32) -> Int32? {
        var status: Int32 = 0
        guard (try? value("waitpid", { waitpid(pid, &status, WNOHANG) })) == pid else { return nil }
        return exitCode(status)
    }

    /// A descriptor that becomes readable when process `pid` exits (Linux `pidfd_open`): wait on it through
    /// ``IOReactor`` to await any process's exit as an event, also one that is not your child (a daemon a
    /// tool started). Close it with ``close(_:)``.
    /// - Throws: ``SystemError`` with `ESRCH` when the process is already gone, `ENOSYS` on kernels before 5.3.
    public static func processExitDescriptor(_ pid: Int32) throws(SystemError) -> Int32 {
        try value("pidfd_open") { rk_pidfd_open(pid) }
    }

    /// A close-on-exec pipe whose ends block (a child's standard stream must not be non-blocking: the flag is
    /// shared with every copy). Make the parent's end non-blocking with ``setNonBlocking(_:)`` if it is read
    /// through the reactor.
    public static func makePipe() throws(SystemError) -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        _ = try value("pipe2") { fds.withUnsafeMutableBufferPointer { rk_pipe_cloexec($0.baseAddress) } }
        return (fds[0], fds[1])
    }

    /// `WIFEXITED`/`WEXITSTATUS`/`WTERMSIG`, spelled out (they are macros Swift does not import).
    private static func exitCode(_ status: Int32) -> Int32 {
        status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }
}

/// The one thread that starts children that must die with the process (`Syscall.spawn(..., diesWithParent:
/// true)`).
///
/// Linux sends the parent-death signal when the *thread* that forked the child ends, not the process. The
/// cooperative pool's and libdispatch's threads come and go; this one is started once and never ends, so the
/// signal comes exactly when the process ends.
final class SpawnerThread: Sendable {
    static let shared = SpawnerThread()

    private struct Queue {
        var jobs: [@Sendable () -> Void] = []
        var started = false
    }

    private let queue = Locked(Queue(), withCondition: true)

    /// Runs `work` on the spawner thread and returns its result; blocks the caller for as long as `work` takes
    /// (a fork and an exec: about a millisecond).
    func perform<T: Sendable>(_ work: @escaping () -> T) -> T {
        let result = Locked<T?>(nil, withCondition: true)
        let handoff = Handoff(work: work)
        let start = queue.withLockSignalling { queue -> Bool in
            queue.jobs.append {
                let value = handoff.work()
                result.withLockSignalling(all: true) { $0 = value }
            }
            defer { queue.started = true }
            return !queue.started
        }
        if start {
            DedicatedThread.start(name: "rk.spawner") { [self] in
                while true {
                    let job = queue.waitWithLock { queue -> (@Sendable () -> Void)? in
                        queue.jobs.isEmpty ? nil : queue.jobs.removeFirst()
                    }
                    job()
                }
            }
        }
        return result.waitWithLock { $0 }
    }

    /// A closure handed to the spawner thread by a caller that blocks until it has run.
    ///
    /// `@unchecked Sendable`: the caller of ``perform(_:)`` waits (under `result`'s lock) until the job has run
    /// and stored its value, so the closure and what it captures (the argument strings' pointers) are used by one
    /// thread at a time, and only while the caller keeps them alive.
    private struct Handoff<T>: @unchecked Sendable {
        let work: () -> T
    }
}
