import Glibc
public import ResourceKit
public import ResourceKitIO
import ResourceKitProcesses

/// A child process as a resource: cancelling it sends SIGTERM, then SIGKILL after a grace period; closing
/// it reaps the child (no zombie is left); its standard output is a stream read through the reactor.
public final class ChildProcess: ManagedResource, BufferedByteReader {
    public static let kind = ResourceKind(name: "example.process", closeTimeout: .seconds(10))

    /// The child's process id.
    public let pid: Int32
    /// Bytes read from standard output but not consumed yet (`readLine` and friends).
    public let readAhead = ReadAhead()
    private let output: GuardedDescriptor
    private let input: Int32
    private let grace: Duration
    private let registration = HandleSlot()
    private let state = Locked<(terminating: Bool, killTimer: DeadlineTimerID?)>((false, nil))

    private init(pid: Int32, output: Int32, input: Int32, grace: Duration) {
        self.pid = pid
        self.output = GuardedDescriptor(output)
        self.input = input
        self.grace = grace
    }

    /// Starts `arguments[0]` (an absolute path) with pipes for standard input and output, registered in `scope`.
    ///
    /// The child dies with this process (`SIGKILL` when it ends, however it ends) and inherits no descriptor but
    /// its two pipes and standard error.
    ///
    /// Cancellation: if `scope` is already cancelled, the child is terminated and reaped at once and the
    /// call throws `CancellationError`.
    public static func spawn(_ arguments: [String], grace: Duration = .seconds(2), in scope: ResourceScope) async throws
        -> ChildProcess
    {
        let stdout = try Syscall.makePipe()
        let stdin = try Syscall.makePipe()
        try Syscall.setNonBlocking(stdout.read)  // read through the reactor
        let pid: Int32
        do {
            // The core's spawner clears the signal mask and dispositions the runtime's threads carry.
            // diesWithParent: a child resource must not outlive its process either (`kill -9` included).
            pid = try Syscall.spawn(
                arguments, standardInput: .descriptor(stdin.read), standardOutput: .descriptor(stdout.write),
                diesWithParent: true)
        } catch {
            [stdin.read, stdin.write, stdout.read, stdout.write].forEach(Syscall.close)
            throw error
        }
        Syscall.close(stdin.read)
        Syscall.close(stdout.write)  // the child's ends
        let child = ChildProcess(pid: pid, output: stdout.read, input: stdin.write, grace: grace)
        try await child.registration.register(child, in: scope, kind: kind, label: "child process")
        return child
    }

    /// The pipes' descriptors this process holds while it is open (for the kit's leak check).
    public var ownedDescriptors: [Int32] {
        ((try? output.withDescriptor { [$0] }) ?? []) + [input]
    }

    /// Reads standard output. Cancellation: a read waiting for output throws `CancellationError` at once.
    public func receive(upTo maxBytes: Int) async throws -> [UInt8]? {
        try await output.readSome(upTo: maxBytes, boundTo: registration.handle) { SystemError("read", errno: $0) }
    }

    /// Writes to the child's standard input (small writes; a pipe's buffer holds 64 KiB).
    /// Cancellation: in a cancelled task, or once the process was cancelled, it throws and writes nothing.
    public func send(_ text: String) throws {
        try registration.handle?.checkCancellation()
        try Task.checkCancellation()
        let written = text.utf8CString.withUnsafeBufferPointer { write(input, $0.baseAddress, $0.count - 1) }
        guard written >= 0 else { throw SystemError.current("write") }
    }

    /// SIGTERM now, SIGKILL after the grace period. Idempotent, non-blocking, any thread.
    // snippet: process-cancel (quoted in Docs/WritingAnAdapter.md)
    public func cancel() {
        let first = state.withLock { state -> Bool in
            defer { state.terminating = true }
            return !state.terminating
        }
        guard first else { return }
        kill(pid, SIGTERM)
        let pid = self.pid
        let timer = DeadlineTimers.shared.schedule(at: .now + grace) { _ = kill(pid, SIGKILL) }
        state.withLock { $0.killTimer = timer }
    }
    // end snippet

    /// Terminates the child if it still runs (as `cancel()`), reaps it on the blocking pool, and closes the pipes.
    public func close() async throws {
        cancel()
        let pid = self.pid
        _ = try await BlockingPool.shared.run { try Syscall.waitForExit(pid) }
        if let timer = state.withLock({ $0.killTimer }) { DeadlineTimers.shared.cancel(timer) }
        output.close()
        Syscall.close(input)
    }
}
