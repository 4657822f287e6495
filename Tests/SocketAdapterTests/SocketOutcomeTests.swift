import Glibc
import ResourceKit
@_spi(Testing) import ResourceKitIO
import SocketAdapter
import ResourceKitTesting
import TestSupport
import Testing

/// Outcomes are told apart: EOF, reset, refused are never `CancellationError`.
@Suite struct SocketOutcomeTests {
    @Test func peerEOFIsEndOfStreamNotAnError() async throws {
        try await withResourceScope("eof", registry: ResourceRegistry()) { scope in
            let listener = try await SocketListener.bind(in: scope)
            let client = try await SocketConnection.connect(host: "127.0.0.1", port: listener.port, in: scope)
            let server = try await listener.accept(in: scope)
            try await server.write("hello\nworld")
            try server.shutdownWrite()
            var lines: [String] = []
            for try await line in client.lines() { lines.append(line) }
            #expect(lines == ["hello", "world"])
            #expect(try await client.read() == nil)
        }
    }

    @Test func peerResetIsATypedError() async throws {
        try await withResourceScope("reset", registry: ResourceRegistry()) { scope in
            let listener = try await SocketListener.bind(in: scope)
            let client = try await SocketConnection.connect(host: "127.0.0.1", port: listener.port, in: scope)
            let server = try await listener.accept(in: scope)
            let reader = Task { try await client.read(upTo: 16) }
            // SO_LINGER 0 then close: the kernel sends RST instead of FIN.
            server.resetConnection()
            await #expect { try await reader.value } throws: { ($0 as? SocketError)?.code == .connectionReset }
        }
    }

    @Test func refusedIsATypedError() async throws {
        // A port that is bound but not listening refuses connections.
        let refusing = LoopbackPort()
        let port = refusing.port
        let registry = ResourceRegistry()
        await #expect {
            try await withResourceScope("refused", registry: registry) { scope in
                _ = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
            }
        } throws: { ($0 as? SocketError)?.code == .connectionRefused }
        #expect(registry.liveCount == 0)
    }

    @Test func badAddressesAreTypedErrors() async {
        await #expect { try await SocketAddress.resolve(host: "127.0.0.1", port: 70_000) } throws: {
            ($0 as? SocketError)?.code == .invalidAddress
        }
        await #expect { try await SocketAddress.resolve(host: "no-such-host.invalid", port: 80) } throws: {
            ($0 as? SocketError)?.code == .resolutionFailed
        }
        #expect(throws: SocketError.self) { try SocketAddress.unix(path: String(repeating: "x", count: 200)) }
    }

    @Test func unixSocketRoundTripAndLineLimit() async throws {
        let path = "/tmp/rk-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        try await withResourceScope("unix", registry: ResourceRegistry()) { scope in
            let listener = try await SocketListener.bind(unixPath: path, in: scope)
            let client = try await SocketConnection.connect(unixPath: path, in: scope)
            let server = try await listener.accept(in: scope)
            try await client.write("PING\r\n")
            #expect(try await server.readLine() == "PING")
            try await client.write(Array(repeating: UInt8(ascii: "x"), count: 5000))
            await #expect { try await server.readLine(maxLength: 4096) } throws: {
                ($0 as? ByteStreamError)?.code == .lineTooLong
            }
            try await server.write([1, 2, 3, 4])
            #expect(try await client.readExactly(4) == [1, 2, 3, 4])
        }
        #expect(access(path, F_OK) != 0, "the socket path is removed on close")
    }

    @Test func ipv6LoopbackWorks() async throws {
        try await withResourceScope("v6", registry: ResourceRegistry()) { scope in
            let listener = try await SocketListener.bind(host: "::1", in: scope)
            #expect(listener.localAddress.family == .ipv6)
            let client = try await SocketConnection.connect(host: "::1", port: listener.port, in: scope)
            let server = try await listener.accept(in: scope)
            try await server.write("v6")
            #expect(try await client.readExactly(2) == Array("v6".utf8))
        }
    }

    /// A write blocked by a peer that does not read (backpressure) is cancellable.
    @Test func writeBlockedByBackpressureIsCancellable() async throws {
        let registry = ResourceRegistry()
        let reactor = IOReactor(name: "t.sock.write")
        defer { reactor.shutdown() }
        try await withResourceScope("server", registry: registry) { server in
            let listener = try await SocketListener.bind(in: server)
            let writer = Task {
                try await withResourceScope("client") { scope in
                    let client = try await SocketConnection.connect(
                        host: "127.0.0.1", port: listener.port, in: scope, reactor: reactor)
                    // More than a loopback connection holds when the peer never reads (a send buffer of at most
                    // 4 MiB here, a receive window that does not grow without reads), and small enough that
                    // filling it is no long synchronous stretch of a cooperative thread under the sanitizers.
                    try await client.write(Array(repeating: UInt8(0), count: 16 * 1024 * 1024))
                }
            }
            let silent = try await listener.accept(in: server)
            try await until("a wait parks", reactor.waitingDescriptorCounts()) { $0 > 0 }
            writer.cancel()
            await #expect(throws: CancellationError.self) { try await writer.value }
            _ = silent
        }
        #expect(registry.liveCount == 0)
    }
}
