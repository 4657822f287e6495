import ResourceKit
import ResourceKitIO
import ResourceKitProcesses

#if canImport(Glibc)
import Glibc
#endif

/// A test peer's process (``SilentPeer``, ``HTTPTestPeer``): started with a pipe to its standard input (closing
/// it stops the peer) and one from its standard output (where it reports), reaped on the blocking pool.
final class PeerProcess: Sendable {
    let pid: Int32
    /// The read end of the peer's standard output; the owner reads and closes it.
    let output: Int32
    /// The write end of the peer's standard input; `nil` once stopped.
    private let input: Locked<Int32?>

    /// Starts `command`.
    /// - Throws: ``SilentPeer/Unavailable`` when it cannot be started.
    init(_ command: [String]) throws {
        let input: (read: Int32, write: Int32)
        let output: (read: Int32, write: Int32)
        do {
            input = try Syscall.makePipe()
            output = try Syscall.makePipe()
        } catch {
            throw SilentPeer.Unavailable(description: "pipe failed: \(error)")
        }
        do {
            pid = try Syscall.spawn(
                command, standardInput: .descriptor(input.read), standardOutput: .descriptor(output.write))
        } catch {
            [input.read, input.write, output.read, output.write].forEach(Syscall.close)
            throw SilentPeer.Unavailable(
                description: "could not start the peer process \(command.first ?? ""): \(error)")
        }
        Syscall.close(input.read)
        Syscall.close(output.write)
        self.output = output.read
        self.input = Locked(input.write)
    }

    /// Writes `text` to the peer's standard input (a command), unless it was stopped.
    func send(_ text: String) {
        input.withLock { writer in
            guard let writer else { return }
            let bytes = Array(text.utf8)
            _ = bytes.withUnsafeBytes { Glibc.write(writer, $0.baseAddress, $0.count) }
        }
    }

    /// Stops the peer (it exits as soon as its input closes) and reaps it, waiting on the blocking pool, never on
    /// the cooperative pool. Idempotent. A cancelled caller returns at once; the peer still exits and is reaped.
    func stop() async {
        guard let pid = closeInput() else { return }
        _ = try? await BlockingPool.shared.run { try Syscall.waitForExit(pid) }
    }

    /// Stops it without waiting: reaped on the blocking pool. For a peer that was not stopped.
    func stopSoon() {
        if let pid = closeInput() {
            BlockingPool.shared.submit { _ = try? Syscall.waitForExit(pid) }
        }
    }

    /// Stops it at once and reaps it here: for a peer that failed to start properly.
    func stopNow() {
        if let pid = closeInput() { _ = try? Syscall.waitForExit(pid) }
    }

    private func closeInput() -> Int32? {
        let writer = input.withLock { writer -> Int32? in
            defer { writer = nil }
            return writer
        }
        guard let writer else { return nil }
        Syscall.close(writer)
        return pid
    }
}
