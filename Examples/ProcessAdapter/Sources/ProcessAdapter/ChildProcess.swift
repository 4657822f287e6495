import Glibc
public import ResourceKit

/// A child process as a resource: cancelling it sends SIGTERM, then SIGKILL after a grace period; closing
/// it reaps the child (no zombie is left); its standard output is a stream read through the reactor.
public final class ChildProcess: ManagedResource, BufferedByteReader {
    public static let kind = ResourceKind(name: "example.process", closeTimeout: .seconds(10))

    /// The child's process id.
    public let pid: pid_t
    /// Bytes read from standard output but not consumed yet (`readLine` and friends).
    public let readAhead = ReadAhead()
    private let output: GuardedDescriptor
    private let input: Int32
    private let grace: Duration
    private let state = Locked<(terminating: Bool, killTimer: ReactorTimerID?, handle: ResourceHandle?)>((false, nil, nil))

    private init(pid: pid_t, output: Int32, input: Int32, grace: Duration) {
        self.pid = pid
        self.output = GuardedDescriptor(output)
        self.input = input
        self.grace = grace
    }

    /// Starts `arguments[0]` (an absolute path) with pipes for standard input and output, registered in `scope`.
    ///
    /// Cancellation: if `scope` is already cancelled, the child is terminated and reaped at once and the
    /// call throws `CancellationError`.
    public static func spawn(_ arguments: [String], grace: Duration = .seconds(2), in scope: ResourceScope) async throws -> ChildProcess {
        var stdout: [Int32] = [0, 0], stdin: [Int32] = [0, 0]
        guard pipe(&stdout) == 0 else { throw SystemError.current("pipe") }
        guard pipe(&stdin) == 0 else {
            Glibc.close(stdout[0]); Glibc.close(stdout[1])
            throw SystemError.current("pipe")
        }
        for fd in stdout + stdin { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        _ = fcntl(stdout[0], F_SETFL, fcntl(stdout[0], F_GETFL) | O_NONBLOCK)  // read through the reactor
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, stdin[0], 0)
        posix_spawn_file_actions_adddup2(&actions, stdout[1], 1)
        // The spawning thread may block signals (the concurrency runtime's threads do): the child starts
        // with none blocked and default dispositions, so that SIGTERM works.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var signals = sigset_t()
        sigemptyset(&signals)
        posix_spawnattr_setsigmask(&attributes, &signals)
        sigaddset(&signals, SIGTERM); sigaddset(&signals, SIGINT); sigaddset(&signals, SIGPIPE)
        posix_spawnattr_setsigdefault(&attributes, &signals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, arguments.first ?? "", &actions, &attributes, &argv, environ)
        Glibc.close(stdin[0]); Glibc.close(stdout[1])  // the child's ends
        guard spawned == 0 else {
            Glibc.close(stdin[1]); Glibc.close(stdout[0])
            throw SystemError("posix_spawn", errno: spawned)
        }
        let child = ChildProcess(pid: pid, output: stdout[0], input: stdin[1], grace: grace)
        let handle = try await scope.register(child, kind: kind, label: "child process")
        child.state.withLock { $0.handle = handle }
        return child
    }

    /// Reads standard output. Cancellation: a read waiting for output throws `CancellationError` at once.
    public func receive(upTo maxBytes: Int) async throws -> [UInt8]? {
        try await output.readSome(upTo: maxBytes, boundTo: state.withLock { $0.handle }) { SystemError("read", errno: $0) }
    }

    /// Writes to the child's standard input (small writes; a pipe's buffer holds 64 KiB).
    public func send(_ text: String) throws {
        let written = text.utf8CString.withUnsafeBufferPointer { write(input, $0.baseAddress, $0.count - 1) }
        guard written >= 0 else { throw SystemError.current("write") }
    }

    /// SIGTERM now, SIGKILL after the grace period. Idempotent, non-blocking, any thread.
    public func cancel() {
        let first = state.withLock { state -> Bool in
            defer { state.terminating = true }
            return !state.terminating
        }
        guard first else { return }
        kill(pid, SIGTERM)
        let pid = self.pid
        let timer = IOReactor.shared.schedule(at: .now + grace) { _ = kill(pid, SIGKILL) }
        state.withLock { $0.killTimer = timer }
    }

    /// Terminates the child if it still runs (as `cancel()`), reaps it on the blocking pool, and closes the pipes.
    public func close() async throws {
        cancel()
        let pid = self.pid
        _ = try await BlockingPool.shared.run { () -> pid_t in
            var status: Int32 = 0
            while true {
                let reaped = waitpid(pid, &status, 0)
                if reaped >= 0 || errno != EINTR { return reaped }
            }
        }
        if let timer = state.withLock({ $0.killTimer }) { IOReactor.shared.cancelTimer(timer) }
        output.close()
        Syscall.close(input)
    }
}
