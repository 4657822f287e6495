import CSystemShims
import Glibc
import ResourceKit
import ResourceKitIO

/// A pipe adapter written the way the guide says, with one seeded bug switched on at a time, so that the
/// kit can be shown to catch each.
final class SeededPipe: ManagedResource {
    enum Bug: Sendable, CaseIterable {
        /// `cancel()` sleeps 20 ms (as if it sent a network cancel request inline).
        case blockingCancel
        /// `cancel()` closes the read end every time it is called, without a guard.
        case nonIdempotentCancel
        /// `close()` forgets to close the descriptors.
        case missingClose
        /// The operation parks on its own continuation and only `onCancel` resumes it: a cancel that arrives
        /// before it parked is lost.
        case lostCancelBeforeStart
        /// A cancelled read throws the adapter's own error instead of `CancellationError`.
        case untranslatedCancellation
        /// The operation parks on its own continuation with no cancellation handler: only the resource's
        /// `cancel()` (or a byte) ends it, so a cancel of its task alone leaves it blocked.
        case ignoresTaskCancellation
        /// The operation parks on its own continuation with a cancellation handler of its own (a cancel before it
        /// parked is remembered): correct on every count but one: it resumes before the stop hooks around it ran.
        case waitsOutsideResourceKit
        /// `cancel()` opens a descriptor of its own (as a cancel path's control connection would) that `close()`
        /// never closes: only a leak check that asks for the descriptors again at the scope's end sees it.
        case leaksWhatCancelOpened
        /// Every cancelled read opens a descriptor (a kill connection per cancel) that nothing closes and the pipe
        /// never reports: only the kit's count of the whole process's descriptors across its rounds sees it.
        case leaksOnEveryCancelUnreported
    }

    /// Descriptors that the seeded leaks left open, for the test to close once the kit has seen them.
    static let leakedOnPurpose = Locked<[Int32]>([])

    /// Closes what the seeded leaks left open, once the kit has seen them.
    static func closeLeakedOnPurpose() {
        let leaked = leakedOnPurpose.withLock { fds in
            defer { fds = [] }
            return fds
        }
        for fd in leaked { Glibc.close(fd) }
    }

    struct Interrupted: Error {}

    static let kind = ResourceKind(name: "test.seeded-pipe", closeTimeout: .seconds(1))
    /// Descriptor numbers at or above this are used only by seeded pipes (the process limit here is 20,000).
    static let reservedRange: Int32 = 15_000

    let bug: Bug?
    let descriptor: GuardedDescriptor
    let readFD: Int32
    let writeFD: Int32
    private let handle = Locked<ResourceHandle?>(nil)
    private let parked = Locked<CheckedContinuation<Void, any Error>?>(nil)
    /// `waitsOutsideResourceKit`: a cancel of the task came before the continuation parked.
    private let cancelledEarly = Locked(false)
    /// `leaksWhatCancelOpened`: the descriptor its first `cancel()` opened.
    private let openedByCancel = Locked<Int32?>(nil)

    /// The descriptors the pipe owns now: its two ends, and what a cancel opened since.
    var descriptors: [Int32] { [readFD, writeFD] + (openedByCancel.withLock { $0 }.map { [$0] } ?? []) }

    private init(bug: Bug?) throws {
        var fds: [Int32] = [0, 0]
        guard rk_pipe_nonblocking(&fds) == 0 else { throw SystemError.current("pipe2") }
        // The seeded bugs close descriptor numbers they no longer own. Other suites run in this process at
        // the same time, so the seeded pipe lives on high numbers that nothing else is given (the lowest
        // free number is always taken first; the 10,000-socket test keeps its peers in another process).
        readFD = fcntl(fds[0], F_DUPFD_CLOEXEC, Self.reservedRange)
        writeFD = fcntl(fds[1], F_DUPFD_CLOEXEC, Self.reservedRange)
        Glibc.close(fds[0])
        Glibc.close(fds[1])
        guard readFD >= 0, writeFD >= 0 else { throw SystemError.current("fcntl") }
        descriptor = GuardedDescriptor(readFD)
        self.bug = bug
    }

    static func open(bug: Bug?, in scope: ResourceScope) async throws -> SeededPipe {
        let pipe = try SeededPipe(bug: bug)
        let handle = try await scope.register(pipe, kind: kind, label: "seeded pipe")
        pipe.handle.withLock { $0 = handle }
        return pipe
    }

    /// Blocks until a byte arrives.
    func readByte() async throws {
        if bug == .ignoresTaskCancellation {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                parked.withLock { $0 = continuation }  // no withTaskCancellationHandler: the bug
            }
            return
        }
        if bug == .waitsOutsideResourceKit {
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    let early = parked.withLock { slot -> Bool in
                        if cancelledEarly.withLock({ $0 }) { return true }
                        slot = continuation
                        return false
                    }
                    if early { continuation.resume(throwing: CancellationError()) }
                }
            } onCancel: {
                parked.withLock { _ in cancelledEarly.withLock { $0 = true } }
                self.resumeParked(throwing: CancellationError())
            }
            return
        }
        if bug == .lostCancelBeforeStart {
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    parked.withLock { $0 = continuation }  // no check for a cancel that came first: the bug
                }
            } onCancel: {
                self.resumeParked(throwing: CancellationError())
            }
            return
        }
        if bug == .leaksOnEveryCancelUnreported {
            try await withTaskCancellationHandler {
                _ = try await descriptor.readSome(upTo: 1, boundTo: handle.withLock { $0 }) {
                    SystemError("read", errno: $0)
                }
            } onCancel: {
                let fd = fcntl(readFD, F_DUPFD_CLOEXEC, Self.reservedRange)
                if fd >= 0 { Self.leakedOnPurpose.withLock { $0.append(fd) } }
            }
            return
        }
        do {
            _ = try await descriptor.readSome(upTo: 1, boundTo: handle.withLock { $0 }) {
                SystemError("read", errno: $0)
            }
        } catch is CancellationError where bug == .untranslatedCancellation {
            throw Interrupted()
        }
    }

    /// Makes a blocked read complete.
    func writeByte() {
        var byte: UInt8 = 1
        _ = write(writeFD, &byte, 1)
        if bug == .lostCancelBeforeStart || bug == .ignoresTaskCancellation || bug == .waitsOutsideResourceKit {
            let continuation = parked.withLock { slot in
                defer { slot = nil }
                return slot
            }
            continuation?.resume()
        }
    }

    private func resumeParked(throwing error: any Error) {
        let continuation = parked.withLock { slot in
            defer { slot = nil }
            return slot
        }
        continuation?.resume(throwing: error)
    }

    func cancel() {
        switch bug {
        case .blockingCancel: usleep(20_000)
        case .nonIdempotentCancel: Glibc.close(readFD)
        case .leaksWhatCancelOpened:
            openedByCancel.withLock { opened in
                guard opened == nil else { return }
                let fd = fcntl(readFD, F_DUPFD_CLOEXEC, Self.reservedRange)
                guard fd >= 0 else { return }
                opened = fd
                Self.leakedOnPurpose.withLock { $0.append(fd) }
            }
        case .lostCancelBeforeStart, .ignoresTaskCancellation, .waitsOutsideResourceKit:
            resumeParked(throwing: CancellationError())
        default: break
        }
    }

    func close() async throws {
        resumeParked(throwing: CancellationError())
        guard bug != .missingClose else { return }
        if bug == .nonIdempotentCancel {
            Syscall.close(writeFD)  // the read end was closed (too often) by cancel()
            return
        }
        descriptor.close()
        Syscall.close(writeFD)
    }
}
