import CSystemShims
import Glibc
import ResourceKit
@_spi(Testing) import ResourceKitIO
import ResourceKitTesting
import SocketAdapter
import TestSupport
import Testing

/// Blocked socket operations, cancelled: real loopback sockets only.
@Suite struct SocketCancellationTests {
    /// A peer that accepts and never writes: the blocked read returns within 50 ms of `task.cancel()`.
    @Test func blockedReadOnSilentPeerReturnsWithin50ms() async throws {
        try await exclusively {
            let registry = ResourceRegistry()
            let clientReactor = IOReactor(name: "t.sock.read")
            defer { clientReactor.shutdown() }
            try await withResourceScope("server", registry: registry) { server in
                let listener = try await SocketListener.bind(in: server)
                var rounds: [CancelMeasurement<[UInt8]?>] = []
                for _ in 0..<5 {
                    let connected = AsyncStream<Void>.makeStream()
                    var accepted: SocketConnection?
                    let round = try await measureCancellation {
                        try await withResourceScope("client") { scope in
                            let connection = try await SocketConnection.connect(
                                host: "127.0.0.1", port: listener.port, in: scope, reactor: clientReactor)
                            connected.continuation.yield()
                            return try await connection.read(upTo: 1024)
                        }
                    } whenParked: {
                        accepted = try await listener.accept(in: server)  // held open and silent
                        _ = await collectEvents(connected.stream) { !$0.isEmpty }
                        // The event we wait for: the read is parked in the (client's own) reactor.
                        try await until("a wait parks", clientReactor.waitingDescriptorCounts()) { $0 > 0 }
                    }
                    rounds.append(round)
                    #expect(throws: CancellationError.self) { try round.result.get() }
                    _ = accepted
                }
                #expect(
                    median(rounds.map(\.excess)) < TimingBound.median,
                    "cancel-to-return \(rounds.map(\.latency)), reference \(rounds.map(\.reference))")
            }
            #expect(registry.liveCount == 0)
        }
    }

    @Test func acceptWithNoClientIsCancelledPromptly() async throws {
        try await exclusively {
            let registry = ResourceRegistry()
            let reactor = IOReactor(name: "t.sock.accept")
            defer { reactor.shutdown() }
            let task = Task {
                try await withResourceScope("accepting", registry: registry) { scope in
                    let listener = try await SocketListener.bind(in: scope, reactor: reactor)
                    return try await listener.accept(in: scope)
                }
            }
            try await until("a wait parks", reactor.waitingDescriptorCounts()) { $0 > 0 }
            let cancelled = ContinuousClock.now
            task.cancel()
            await #expect(throws: CancellationError.self) { try await task.value }
            #expect(ContinuousClock.now - cancelled < TimingBound.singleShot)
            #expect(registry.liveCount == 0)
        }
    }

    /// A listener with a full accept queue drops further SYNs: the next connect stays in progress until
    /// cancelled.
    @Test func connectThatCannotCompleteIsCancelledPromptly() async throws {
        try await exclusively {
            let registry = ResourceRegistry()
            let reactor = IOReactor(name: "t.sock.connect")
            defer { reactor.shutdown() }
            try await withResourceScope("backlog", registry: registry) { scope in
                let listener = try await SocketListener.bind(backlog: 0, in: scope)
                // Fill the accept queue (Linux holds backlog + 1 established connections) without accepting; the
                // first connect that cannot complete within 300 ms shows the queue is full.
                var fillers: [SocketConnection] = []
                var full = false
                for _ in 0..<8 {
                    do {
                        fillers.append(
                            try await SocketConnection.connect(
                                host: "127.0.0.1", port: listener.port, in: scope, deadline: .now + .milliseconds(300)))
                    } catch is DeadlineExceededError {
                        full = true
                        break
                    }
                }
                try #require(full, "the accept queue never filled up")
                let pending: Task<SocketConnection, any Error>? = Task {
                    try await SocketConnection.connect(
                        host: "127.0.0.1", port: listener.port, in: scope, reactor: reactor)
                }
                let attempt = try #require(pending)
                try await until("a wait parks", reactor.waitingDescriptorCounts()) { $0 > 0 }
                let cancelled = ContinuousClock.now
                attempt.cancel()
                await #expect(throws: CancellationError.self) { try await attempt.value }
                #expect(ContinuousClock.now - cancelled < TimingBound.singleShot)
                _ = fillers
            }
            #expect(registry.liveCount == 0)
        }
    }

    /// A scope deadline on a blocked read: its own error, and the descriptor is closed.
    @Test func readDeadlineIsItsOwnErrorAndClosesTheSocket() async throws {
        let registry = ResourceRegistry()
        var inode: UInt64 = 0
        try await withResourceScope("server", registry: registry) { server in
            let listener = try await SocketListener.bind(in: server)
            let acceptor = Task { try await listener.accept(in: server) }
            await #expect(throws: DeadlineExceededError.self) {
                try await withResourceScope("client", deadline: .now + .milliseconds(60)) { scope in
                    let connection = try await SocketConnection.connect(
                        host: "127.0.0.1", port: listener.port, in: scope)
                    inode = try #require(Self.socketInode(connection))
                    _ = try await connection.read(upTo: 16)
                }
            }
            #expect(DescriptorLedger.now().openSockets([inode]) == 0)
            _ = try await acceptor.value
        }
        #expect(registry.liveCount == 0)
    }

    static func socketInode(_ connection: SocketConnection) -> UInt64? {
        // The newest socket link in /proc/self/fd that matches the connection's local port is ours; simpler:
        // find the inode through the local address.
        guard let port = connection.localAddress?.port else { return nil }
        let path = "/proc/net/tcp"
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 512)
        let hexPort = String(port, radix: 16, uppercase: true)
        let needle = ":" + String(repeating: "0", count: max(0, 4 - hexPort.count)) + hexPort
        while fgets(&line, 512, file) != nil {
            let text = String(decoding: line.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let fields = text.split(separator: " ")
            if fields.count > 9, fields[1].hasSuffix(needle) {
                return UInt64(fields[9])
            }
        }
        return nil
    }
}
