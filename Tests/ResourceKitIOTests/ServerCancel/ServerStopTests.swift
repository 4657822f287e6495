import Glibc
@_spi(Testing) import ResourceKit
import ResourceKitIO
import ResourceKitProcesses
import ResourceKitTesting
import TestSupport
import Testing

/// `ServerStop` through real I/O: a pipe stands for the operation's connection (a byte written to it is the
/// server's reply), and `stop` for the command on the second connection, which the "server" ignores while it has
/// not received the operation yet (the stop overtook it).
@Suite struct ServerStopTests {
    static let kind = ResourceKind(name: "test.server-stop")

    /// The operation's connection: the body waits for the reply byte, the drain reads it.
    final class Wire: Sendable {
        let read: Int32
        let write: Int32
        let stopsSent = Locked(0)

        init() throws {
            (read, write) = try Syscall.makePipe()
        }

        func reply() { _ = Glibc.write(write, "r", 1) }

        func readReply(boundTo handle: ResourceHandle?, deadline: ContinuousClock.Instant?) async throws {
            try await IOReactor.shared.wait(for: read, .readable, boundTo: handle, deadline: deadline)
            var byte: UInt8 = 0
            _ = Glibc.read(read, &byte, 1)
        }

        /// A stop that the server takes only from its `taken`th send on: the earlier ones overtook the operation.
        func stop(takenFrom taken: Int) {
            let sent = stopsSent.withLock { count -> Int in
                count += 1
                return count
            }
            if sent == taken { reply() }
        }

        deinit {
            Syscall.close(read)
            Syscall.close(write)
        }
    }

    func withResource(_ body: (ResourceHandle, ResourceRegistry) async throws -> Void) async throws {
        let registry = ResourceRegistry()
        try await withResourceScope("server stop", registry: registry) { scope in
            let handle = try await scope.register(RecordingResource("r", log: CloseLog()), kind: Self.kind, label: "r")
            try await body(handle, registry)
        }
    }

    /// The promise end to end: the cancelled operation returns at once; its stop is sent again until the reply
    /// shows it took; the next operation waits for the drain and no stop reaches it.
    @Test func aStopThatOvertookItsOperationIsSentAgainUntilTheReplyShowsIt() async throws {
        let wire = try Wire()
        let serverStop = ServerStop()
        let sentBeforeNext = Locked(0)
        try await withResource { handle, registry in
            let operation = Task {
                try await serverStop.run(
                    boundTo: handle, stop: { wire.stop(takenFrom: 3) },
                    drain: { deadline in try await wire.readReply(boundTo: nil, deadline: deadline) }
                ) { try await wire.readReply(boundTo: handle, deadline: nil) }
            }
            try await until("the operation waits for its reply", registry.operationCountUpdates()) { $0 >= 1 }
            let cancelled = ContinuousClock.now
            operation.cancel()
            await #expect(throws: CancellationError.self) { try await operation.value }
            // Generous: the thread sanitizer beside two busy loops took 192 ms once. The figure is the kit's.
            #expect(ContinuousClock.now - cancelled < .seconds(2))
            // The next operation runs once the drain read the reply, which only the third stop produced: at least
            // three were sent by then. A fourth may have gone out before the drain read the reply (a stop is sent
            // every `resendEvery` until then: under the thread sanitizer the drain once read it after the next
            // 10 ms had passed), and none after it: the count the next operation sees is the final one.
            try await serverStop.run(boundTo: handle, stop: {}, drain: { _ in }) {
                sentBeforeNext.withLock { $0 = wire.stopsSent.withLock { $0 } }
                #expect(serverStop.isBusy)
            }
            #expect(sentBeforeNext.withLock { $0 } >= 3)
            #expect(!serverStop.isBusy && !serverStop.isBroken)
        }
        await serverStop.close()
        #expect(wire.stopsSent.withLock { $0 } == sentBeforeNext.withLock { $0 })
    }

    @Test func aDrainThatGivesUpBreaksTheConnection() async throws {
        let wire = try Wire()
        var configuration = ServerStop.Configuration()
        configuration.giveUpAfter = .milliseconds(50)
        let serverStop = ServerStop(configuration: configuration)
        try await withResource { handle, registry in
            let operation = Task {
                try await serverStop.run(
                    boundTo: handle, stop: { wire.stop(takenFrom: .max) },  // the server never stops it
                    drain: { deadline in try await wire.readReply(boundTo: nil, deadline: deadline) }
                ) { try await wire.readReply(boundTo: handle, deadline: nil) }
            }
            try await until("the operation waits for its reply", registry.operationCountUpdates()) { $0 >= 1 }
            operation.cancel()
            await #expect(throws: CancellationError.self) { try await operation.value }
            await #expect {
                try await serverStop.run(boundTo: handle, stop: {}, drain: { _ in }) {}
            } throws: { error in
                (error as? ResourceKitError)?.code == .connectionBroken
            }
            #expect(serverStop.isBroken)
        }
        await serverStop.close()
        // At least the first send; how many more fit in 50 ms depends on the machine's load, not on the promise.
        #expect(wire.stopsSent.withLock { $0 } >= 1)
    }

    @Test func anOperationThatCompletesReleasesAtOnceAndCloseEndsTheRest() async throws {
        let wire = try Wire()
        let serverStop = ServerStop()
        try await withResource { handle, _ in
            wire.reply()
            try await serverStop.run(boundTo: handle, stop: { Issue.record("no cancel, no stop") }, drain: { _ in }) {
                try await wire.readReply(boundTo: handle, deadline: nil)
            }
            #expect(!serverStop.isBusy)
        }
        await serverStop.close()
        await #expect {
            try await serverStop.run(boundTo: nil, stop: {}, drain: { _ in }) {}
        } throws: { error in
            (error as? ResourceKitError)?.code == .serverStopClosed
        }
    }
}
