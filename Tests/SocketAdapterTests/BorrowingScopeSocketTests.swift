import ResourceKit
@_spi(Testing) import ResourceKitIO
import ResourceKitTesting
import SocketAdapter
import TestSupport
import Testing

/// The borrowing scope reaches a socket adapter's read with no code of the adapter's: a connection an outer
/// scope owns, read inside a deadline scope (and inside a scope cancelled from another task), on real loopback
/// sockets. The read ends with the scope's reason; the connection and its owner live on.
@Suite struct BorrowingScopeSocketTests {
    @Test func aReadOnAnOuterScopesSocketObeysTheInnerDeadline() async throws {
        let registry = ResourceRegistry()
        try await withResourceScope("connection owner", registry: registry) { owner in
            let listener = try await SocketListener.bind(in: owner)
            let connection = try await SocketConnection.connect(host: "127.0.0.1", port: listener.port, in: owner)
            let peer = try await listener.accept(in: owner)
            let started = ContinuousClock.now
            let request = Task {
                try await withResourceScope("request", deadline: .now + .milliseconds(300)) { _ in
                    _ = try await connection.receive(upTo: 16)
                }
            }
            let result = await outcome(of: request, within: .milliseconds(300) + TimingBound.singleShot)
            #expect(result?.failure is DeadlineExceededError, "\(String(describing: result))")
            #expect(ContinuousClock.now - started >= .milliseconds(300))
            #expect(!owner.isCancelled)
            // Nothing was consumed and the socket is usable: the next read gets the peer's bytes.
            try await peer.write("ok")
            #expect(try await connection.receive(upTo: 16) == Array("ok".utf8))
        }
        #expect(registry.liveCount == 0)
    }

    @Test func cancelOfTheBorrowingScopeFromAnotherTaskReachesARead() async throws {
        let registry = ResourceRegistry()
        let reactor = IOReactor(name: "t.sock.borrow")
        defer { reactor.shutdown() }
        try await withResourceScope("connection owner", registry: registry) { owner in
            let listener = try await SocketListener.bind(in: owner)
            let connection = try await SocketConnection.connect(
                host: "127.0.0.1", port: listener.port, in: owner, reactor: reactor)
            let peer = try await listener.accept(in: owner)
            let scopes = AsyncStream<ResourceScope>.makeStream()
            let request = Task {
                try await withResourceScope("request") { scope in
                    scopes.continuation.yield(scope)
                    _ = try await connection.receive(upTo: 16)
                }
            }
            var iterator = scopes.stream.makeAsyncIterator()
            let scope = try #require(await iterator.next())
            try await until("the read parks", reactor.waitingDescriptorCounts()) { $0 > 0 }
            scope.cancel()
            let result = await outcome(of: request)
            #expect(result?.failure is CancellationError, "\(String(describing: result))")
            try await peer.write("ok")
            #expect(try await connection.receive(upTo: 16) == Array("ok".utf8))
        }
        #expect(registry.liveCount == 0)
    }
}
