import ResourceKit
@_spi(Testing) import ResourceKitIO
import ResourceKitTesting
import SocketAdapter
import TestSupport
import Testing

/// The walk of a cancelled socket read, the one `Scripts/walks` counts (Docs/Architecture.md, "Two walks"): a read
/// parks on a silent peer, its task is cancelled, the read returns `CancellationError`. A first round, outside the
/// coverage window, makes whatever a process makes once (the reactor's thread, the timers); the second is the walk.
@Suite struct CancelWalkTests {
    @Test func aCancelledSocketRead() async throws {
        let reactor = IOReactor(name: "t.walk.read")
        defer { reactor.shutdown() }
        try await withResourceScope("walk", registry: ResourceRegistry()) { scope in
            let listener = try await SocketListener.bind(in: scope)
            for measured in [false, true] {
                let client = try await SocketConnection.connect(
                    host: "127.0.0.1", port: listener.port, in: scope, reactor: reactor)
                let server = try await listener.accept(in: scope)  // held open and silent
                let counts = reactor.waitingDescriptorCounts()
                let cancelledRead = {
                    let read = Task { try await client.read(upTo: 1024) }
                    try await until("the read parks", counts) { $0 > 0 }
                    read.cancel()
                    await #expect(throws: CancellationError.self) { try await read.value }
                }
                if measured {
                    try await coverageWindow("socket-read", cancelledRead)
                } else {
                    try await cancelledRead()
                }
                _ = server
            }
        }
    }
}
