import ResourceKit
@_spi(Testing) import ResourceKitIO
import ResourceKitTesting
import SocketAdapter
import TestSupport
import Testing

/// The walk `socket-read-owned` that `Scripts/walks` counts (Docs/Architecture.md, "Two walks"): a request scope owns
/// a socket, its task blocks in a read on a silent peer, the task is cancelled, and the walk ends when the scope has
/// closed the socket (the task's `withResourceScope` returned `CancellationError`). The coverage window opens at
/// `Task.cancel()`. A first round, outside the window, makes whatever a process makes once (the reactor's thread,
/// the timers); the second is the walk.
@Suite struct CancelWalkTests {
    @Test func socketReadOwned() async throws {
        let reactor = IOReactor(name: "t.walk.read")
        defer { reactor.shutdown() }
        let registry = ResourceRegistry()
        try await withResourceScope("server", registry: registry) { server in
            let listener = try await SocketListener.bind(in: server)
            for measured in [false, true] {
                let request = Task {
                    try await withResourceScope("request", registry: registry) { scope in
                        let client = try await SocketConnection.connect(
                            host: "127.0.0.1", port: listener.port, in: scope, reactor: reactor)
                        _ = try await client.read(upTo: 1024)
                        Issue.record("the silent peer's read returned")
                    }
                }
                let peer = try await listener.accept(in: server)  // held open and silent
                try await until("the read parks", reactor.waitingDescriptorCounts()) { $0 > 0 }
                let live = registry.liveCount
                let cancelled = {
                    request.cancel()
                    await #expect(throws: CancellationError.self) { try await request.value }
                }
                if measured {
                    await coverageWindow("socket-read-owned", cancelled)
                } else {
                    await cancelled()
                }
                #expect(registry.liveCount == live - 1, "the request's socket is closed; the server's stay")
                _ = peer
            }
        }
    }
}
