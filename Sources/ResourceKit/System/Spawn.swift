import CSystemShims

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
    /// Starts a child process with `posix_spawnp` (`arguments[0]` is a path, or a name looked up on `PATH`).
    ///
    /// The child starts with no signal blocked and every signal at its default disposition. The concurrency
    /// runtime's threads block signals, and a child would inherit that mask: a `SIGTERM` sent to it later would
    /// then do nothing. Every spawner in the package goes through here for that reason.
    ///
    /// - Parameters:
    ///   - arguments: the program and its arguments.
    ///   - environment: the child's whole environment; `nil` passes the parent's.
    ///   - standardInput: what the child reads (default `/dev/null`).
    ///   - standardOutput: where the child writes (default the parent's).
    ///   - standardError: where the child's errors go (default the parent's).
    /// - Returns: the child's pid. Reap it with ``waitForExit(_:)`` (blocking: from the blocking pool).
    /// - Throws: ``SystemError`` (`posix_spawn`) with the reason, for example `ENOENT` for a missing program.
    public static func spawn(
        _ arguments: [String],
        environment: [String: String]? = nil,
        standardInput: ChildStream = .nullDevice,
        standardOutput: ChildStream = .inherit,
        standardError: ChildStream = .inherit
    ) throws(SystemError) -> Int32 {
        guard let program = arguments.first else { throw SystemError("posix_spawn", errno: EINVAL) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (target, stream) in [(Int32(0), standardInput), (1, standardOutput), (2, standardError)] {
            switch stream {
            case .inherit:
                break
            case .nullDevice:
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0)
            case .file(let path, let truncate):
                posix_spawn_file_actions_addopen(
                    &actions, target, path, O_WRONLY | O_CREAT | (truncate ? O_TRUNC : O_APPEND), 0o644)
            case .descriptor(let fd):
                posix_spawn_file_actions_adddup2(&actions, fd, target)
            case .standardOutput:
                posix_spawn_file_actions_adddup2(&actions, 1, target)
            }
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let envp: [UnsafeMutablePointer<CChar>?]? = environment.map {
            $0.map { strdup("\($0.key)=\($0.value)") } + [nil]
        }
        defer { envp?.forEach { free($0) } }
        var pid: pid_t = 0
        let result: Int32
        if let envp {
            result = envp.withUnsafeBufferPointer {
                posix_spawnp(&pid, program, &actions, &attributes, argv, $0.baseAddress)
            }
        } else {
            result = posix_spawnp(&pid, program, &actions, &attributes, argv, environ)
        }
        guard result == 0 else { throw SystemError("posix_spawn", errno: result) }
        return pid
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
