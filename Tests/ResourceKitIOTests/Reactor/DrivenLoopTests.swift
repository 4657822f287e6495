import CSystemShims
import Glibc
import ResourceKit
import ResourceKitTesting
import TestSupport
import Testing

@_spi(Testing) import ResourceKitIO

/// ``IOReactor/waitForAny(_:heldBy:timer:boundTo:deadline:)``, one turn of a driven library's loop, through real
/// pipes and sockets: whichever descriptor is ready first, or the library's timer; interest that changes between
/// turns; every level of cancellation wakes it at once and leaves nothing registered.
@Suite(.serialized) struct DrivenLoopTests {
    let reactor = IOReactor(name: "test.reactor.driven")

    /// Two pipes whose read ends the "library" waits on.
    struct Pipes {
        let a: (read: Int32, write: Int32)
        let b: (read: Int32, write: Int32)

        init() throws {
            var fds: [Int32] = [0, 0]
            guard rk_pipe_nonblocking(&fds) == 0 else { throw SystemError.current("pipe2") }
            a = (fds[0], fds[1])
            guard rk_pipe_nonblocking(&fds) == 0 else { throw SystemError.current("pipe2") }
            b = (fds[0], fds[1])
        }

        func close() {
            for fd in [a.read, a.write, b.read, b.write] { Glibc.close(fd) }
        }
    }

    static func write(_ fd: Int32) {
        var byte: UInt8 = 1
        _ = Glibc.write(fd, &byte, 1)
    }

    /// Waits until the reactor has `count` descriptors waiting (an event, not a poll).
    func parked(_ count: Int) async throws {
        try await until("\(count) descriptor(s) wait", reactor.waitingDescriptorCounts()) { $0 == count }
    }

    @Test func theReadyDescriptorEndsTheTurnAndTheOthersLeave() async throws {
        defer { reactor.shutdown() }
        let pipes = try Pipes()
        defer { pipes.close() }
        // Owner: this test, which awaits it.
        let turn = Task {
            try await reactor.waitForAny(
                [LoopInterest(pipes.a.read, .readable), LoopInterest(pipes.b.read, .readable)],
                timer: .now + .seconds(60))
        }
        try await parked(2)
        Self.write(pipes.b.write)
        #expect(try await turn.value == .ready(fd: pipes.b.read, .readable))
        #expect(reactor.waitingDescriptorCount == 0, "the other wait left the reactor before the turn returned")

        // The next turn wants something else: the first pipe readable, a socket writable.
        var pair: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &pair) == 0)
        defer { for fd in pair { Glibc.close(fd) } }
        let next = try await reactor.waitForAny(
            [LoopInterest(pipes.a.read, .readable), LoopInterest(pair[0], .writable)], timer: .now + .seconds(60))
        #expect(next == .ready(fd: pair[0], .writable))
    }

    @Test func theLibrarysTimerEndsTheTurnWithoutAnError() async throws {
        defer { reactor.shutdown() }
        let pipes = try Pipes()
        defer { pipes.close() }
        let timer = ContinuousClock.now + .milliseconds(50)
        let wake = try await reactor.waitForAny([LoopInterest(pipes.a.read, .readable)], timer: timer)
        #expect(wake == .timer)
        #expect(ContinuousClock.now >= timer)
        #expect(reactor.waitingDescriptorCount == 0)
        // A timer alone, and one already past.
        #expect(try await reactor.waitForAny([], timer: .now + .milliseconds(10)) == .timer)
        #expect(try await reactor.waitForAny([LoopInterest(pipes.a.read, .readable)], timer: .now) == .timer)
        await #expect {
            try await reactor.waitForAny([])
        } throws: { ($0 as? ResourceKitError)?.code == .nothingToWaitFor }
    }

    @Test func everyLevelOfCancellationWakesTheTurn() async throws {
        defer { reactor.shutdown() }
        let pipes = try Pipes()
        defer { pipes.close() }
        let interests = [LoopInterest(pipes.a.read, .readable), LoopInterest(pipes.b.read, .readable)]

        // The task.
        // Owner: this test, which cancels and awaits it.
        let byTask = Task { try await reactor.waitForAny(interests, timer: .now + .seconds(60)) }
        try await parked(2)
        byTask.cancel()
        await #expect(throws: CancellationError.self) { try await byTask.value }
        try await parked(0)

        // The resource (its scope's cancel reaches the handle).
        try await withResourceScope("driven") { scope in
            let handle = try await scope.register(NoOpResource(), kind: Self.kind, label: "library")
            // Owner: this test, which awaits it.
            let byResource = Task {
                try await reactor.waitForAny(interests, timer: .now + .seconds(60), boundTo: handle)
            }
            try await parked(2)
            handle.cancel()
            await #expect(throws: CancellationError.self) { try await byResource.value }
        }
        try await parked(0)

        // A borrowing scope.
        let borrower = Locked<ResourceScope?>(nil)
        // Owner: this test, which cancels its scope and awaits it.
        let byScope = Task {
            try await withResourceScope("borrower") { scope in
                borrower.withLock { $0 = scope }
                return try await reactor.waitForAny(interests, timer: .now + .seconds(60))
            }
        }
        try await parked(2)
        borrower.withLock { $0 }?.cancel()
        await #expect(throws: CancellationError.self) { try await byScope.value }
        try await parked(0)

        // A deadline.
        await #expect(throws: DeadlineExceededError.self) {
            try await reactor.waitForAny(interests, timer: .now + .seconds(60), deadline: .now + .milliseconds(50))
        }
        try await parked(0)

        // A checkpoint: a cancelled task registers nothing.
        // Owner: this test, which awaits it.
        let cancelledFirst = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await reactor.waitForAny(interests)
        }
        await #expect(throws: CancellationError.self) { try await cancelledFirst.value }
        #expect(reactor.waitingDescriptorCount == 0)
    }

    /// With the library's descriptor set as the holder: a descriptor the library gave back is never waited on.
    @Test func aDescriptorTheLibraryGaveBackIsNotWaitedOn() async throws {
        defer { reactor.shutdown() }
        let pipes = try Pipes()
        defer { pipes.close() }
        let sockets = LibraryDescriptors(reactor: reactor)
        sockets.insert(pipes.a.read)
        await #expect {
            try await reactor.waitForAny(
                [LoopInterest(pipes.a.read, .readable), LoopInterest(pipes.b.read, .readable)], heldBy: sockets,
                timer: .now + .seconds(60))
        } throws: { ($0 as? ResourceKitError)?.code == .descriptorClosed }
        #expect(reactor.waitingDescriptorCount == 0)
        Self.write(pipes.a.write)
        #expect(
            try await reactor.waitForAny([LoopInterest(pipes.a.read, .readable)], heldBy: sockets)
                == .ready(fd: pipes.a.read, .readable))
    }

    static let kind = ResourceKind(name: "test.driven", closeTimeout: .seconds(1))
}
