import ResourceKit
import ResourceKitTesting
import SocketAdapter
import Testing

/// ``HTTPTestPeer`` through a real client (`SocketConnection`): each path's behaviour, and the open and close
/// times it reports, which a test of an HTTP adapter's cancellation reads instead of writing a probe.
@Suite struct HTTPTestPeerTests {
    static func get(_ path: String) -> String { "GET \(path) HTTP/1.1\r\nHost: test\r\n\r\n" }

    /// Reads one response's head and `Content-Length` body.
    static func response(from connection: SocketConnection) async throws -> (status: String, body: String) {
        let status = try await connection.readLine() ?? ""
        var length = 0
        while let header = try await connection.readLine(), !header.isEmpty {
            if header.lowercased().hasPrefix("content-length:") {
                length = Int(header.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) ?? 0
            }
        }
        let body = try await connection.readExactly(length)
        return (status, String(decoding: body, as: UTF8.self))
    }

    @Test func answersHoldsReleasesAndReportsEachConnection() async throws {
        let peer = try HTTPTestPeer()
        defer { Task { await peer.stop() } }
        try await withResourceScope("http", registry: ResourceRegistry()) { scope in
            let client = try await SocketConnection.connect(host: "127.0.0.1", port: peer.port, in: scope)
            try await client.write(Self.get("/answer"))
            let answered = try await Self.response(from: client)
            #expect(answered.status == "HTTP/1.1 200 OK" && answered.body == "ok")
            try await client.write(Self.get("/echo/token-7"))
            #expect(try await Self.response(from: client).body == "token-7")
            try await until("the peer counts the connection", peer.openConnectionCounts()) { $0 == 1 }

            // Held until released (the same connection: keep-alive).
            try await client.write(Self.get("/hold/k1"))
            try await until("the request arrived", peer.openConnectionCounts()) { _ in
                peer.connections.first?.path == "/hold/k1"
            }
            peer.release("k1")
            #expect(try await Self.response(from: client).body == "released")
        }
        // The scope closed the client: the peer saw the close.
        try await until("the peer saw the close", peer.openConnectionCounts()) { $0 == 0 }
        let connection = try #require(peer.connections.first)
        #expect(connection.closed != nil && connection.closed! > connection.opened)
    }

    /// The case a cancellation test is about: a request that is never answered, the client's task cancelled, the
    /// connection closed by its scope; the peer's close time says when the server saw the disconnect.
    @Test func aNeverAnsweredRequestsDisconnectIsSeen() async throws {
        let peer = try HTTPTestPeer()
        defer { Task { await peer.stop() } }
        let cancelled = Locked<ContinuousClock.Instant?>(nil)
        // Owner: this test, which cancels and awaits it.
        let request = Task {
            try await withResourceScope("http", registry: ResourceRegistry()) { scope in
                let client = try await SocketConnection.connect(host: "127.0.0.1", port: peer.port, in: scope)
                try await client.write(Self.get("/never"))
                _ = try await client.readLine()
            }
        }
        try await until("the request arrived", peer.openConnectionCounts()) { _ in
            peer.connections.first?.path == "/never"
        }
        cancelled.withLock { $0 = .now }
        request.cancel()
        await #expect(throws: CancellationError.self) { try await request.value }
        try await until("the peer saw the disconnect", peer.openConnectionCounts()) { $0 == 0 }
        let closed = try #require(peer.connections.first?.closed)
        let after = closed - (try #require(cancelled.withLock { $0 }))
        print("the peer saw the disconnect \(after) after the cancel")
        #expect(after > .zero && after < .seconds(1), "the disconnect was seen \(after) after the cancel")
    }

    @Test func aTrickleArrivesAByteAtATime() async throws {
        let peer = try HTTPTestPeer()
        defer { Task { await peer.stop() } }
        try await withResourceScope("http", registry: ResourceRegistry()) { scope in
            let client = try await SocketConnection.connect(host: "127.0.0.1", port: peer.port, in: scope)
            let sent = ContinuousClock.now
            try await client.write(Self.get("/trickle"))
            #expect(try await client.readLine() == "HTTP/1.1 200 OK")
            while let header = try await client.readLine(), !header.isEmpty {}
            _ = try await client.readExactly(5)
            // The peer sends byte k no earlier than k × 50 ms after it got the request: a lower bound that load
            // only lengthens.
            #expect(ContinuousClock.now - sent >= .milliseconds(200))
        }
    }
}
