import Glibc
import ResourceKit
import ResourceKitIO
import SocketAdapter
import ResourceKitTesting
import TestSupport
import Testing

/// `RequestSession` on real loopback sockets: the peer's disconnect cancels the running request at once, a
/// pipelining client is answered in order, and each half-close policy does what it says.
@Suite struct RequestSessionTests {
    /// What a request handler saw: the requests it began, and those whose scope was cancelled under them.
    final class Seen: Sendable {
        let began = Locked<[String]>([])
        let cancelled = Locked<[String]>([])
        let blocked = OneShotEvent()
    }

    /// Serves one session per connection; `SLOW` blocks until its request scope is cancelled, anything else is
    /// echoed. Runs `body` with the port and the sessions' endings.
    static func serving(
        halfClose: RequestSession.HalfClose, seen: Seen,
        _ body: (Int, ResourceScope, () async -> RequestSession.Ending?) async throws -> Void
    ) async throws {
        try await withResourceScope("test", deadline: .now + TimingBound.singleShot, registry: ResourceRegistry()) {
            scope in
            let listener = try await SocketListener.bind(in: scope)
            let (endings, ended) = AsyncStream<RequestSession.Ending>.makeStream()
            let server = Task {
                try await SocketServer.serve(listener) { connection, _ in
                    let ending = try await RequestSession.run(on: connection, halfClose: halfClose) {
                        try await $0.readLine()
                    } handle: { line, requestScope in
                        seen.began.withLock { $0.append(line) }
                        if line == "SLOW" {
                            do {
                                seen.blocked.set()
                                try await OneShotEvent().wait()
                            } catch {
                                if requestScope.isCancelled || Task.isCancelled {
                                    seen.cancelled.withLock { $0.append(line) }
                                }
                                throw error
                            }
                        }
                        try await connection.write(line + "\n")
                        return line != "QUIT"
                    }
                    ended.yield(ending)
                }
            }
            defer { server.cancel() }
            var iterator = endings.makeAsyncIterator()
            try await body(listener.port, scope) { await iterator.next() }
        }
    }

    /// The client leaves while its request runs, by a reset or (the default half-close policy, as Go's `net/http`)
    /// by ending its input: the request is cancelled at once, unanswered.
    @Test(arguments: ["reset", "end of input"])
    func theClientLeavingCancelsTheRunningRequest(how: String) async throws {
        let seen = Seen()
        try await Self.serving(halfClose: .cancels, seen: seen) { port, scope, nextEnding in
            try await withResourceScope("client") { clientScope in
                let client = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: clientScope)
                try await client.write("SLOW\n")
                try await seen.blocked.wait()
                if how == "reset" {
                    client.resetConnection()
                } else {
                    try client.shutdownWrite()
                    #expect(try await client.readLine() == nil, "no answer")
                }
            }
            #expect(await nextEnding() == .peerGone)
            #expect(seen.cancelled.withLock { $0 } == ["SLOW"])
        }
    }

    /// Requests sent before any answer is read are read ahead and answered in order; none is cancelled.
    @Test func aPipeliningClientIsAnsweredInOrder() async throws {
        let seen = Seen()
        try await Self.serving(halfClose: .cancels, seen: seen) { port, scope, nextEnding in
            let client = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
            try await client.write("one\ntwo\nthree\nQUIT\n")
            var answers: [String] = []
            while let line = try await client.readLine() { answers.append(line) }
            #expect(answers == ["one", "two", "three", "QUIT"])
            #expect(await nextEnding() == .finished)
            #expect(seen.cancelled.withLock { $0 }.isEmpty)
        }
    }

    /// The other policy: the client half-closes after its requests, and every one is answered before the close.
    @Test func answersThenClosesAnswersWhatWasSentBeforeTheEndOfInput() async throws {
        let seen = Seen()
        try await Self.serving(halfClose: .answersThenCloses, seen: seen) { port, scope, nextEnding in
            let client = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
            try await client.write("ADD x\nADD y\n")
            try client.shutdownWrite()
            var answers: [String] = []
            while let line = try await client.readLine() { answers.append(line) }
            #expect(answers == ["ADD x", "ADD y"])
            #expect(await nextEnding() == .finished)
            #expect(seen.began.withLock { $0 } == ["ADD x", "ADD y"])
        }
    }

    /// The session ends with input still unread (here half a megabyte a client still sends behind its `QUIT`): the
    /// session drains it before the close, so the client's send succeeds and its answers are there to read. A plain
    /// close with unread input sends a reset: the client's read then fails with `ECONNRESET`, its answers unread
    /// (tried: this test fails so without the lingering close).
    @Test func answersSurviveUnreadInputAtTheClose() async throws {
        try await withResourceScope("test", deadline: .now + TimingBound.singleShot, registry: ResourceRegistry()) {
            scope in
            let listener = try await SocketListener.bind(in: scope)
            let closed = OneShotEvent()
            let server = Task {
                try await SocketServer.serve(listener) { connection, _ in
                    _ = try await RequestSession.run(on: connection) {
                        try await $0.readLine()
                    } handle: { line, _ in
                        try await connection.write(line + "\n")
                        return line != "QUIT"
                    }
                    connection.closeSynchronously()
                    closed.set()
                }
            }
            defer { server.cancel() }
            let client = try await SocketConnection.connect(host: "127.0.0.1", port: listener.port, in: scope)
            try await client.write("one\nQUIT\n")
            // Half a megabyte behind the QUIT, more than the session reads ahead: most of it is still in the
            // server's socket when the session ends. Written by a task of its own: the server reads it only while
            // it lingers.
            let behind = Task { try await client.write(String(repeating: "behind the quit\n", count: 32_768)) }
            try await closed.wait()
            await #expect(throws: Never.self, "the client's send was not reset") { try await behind.value }
            var answers: [String] = []
            while let line = try await client.readLine() { answers.append(line) }
            #expect(answers == ["one", "QUIT"])
        }
    }
}
