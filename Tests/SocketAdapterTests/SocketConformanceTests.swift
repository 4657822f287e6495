import Glibc
import ResourceKit
import ResourceKitTesting
@_spi(Testing) import SocketAdapter
import TestSupport
import Testing

/// The shipped socket adapter passes the same conformance kit third-party adapters run.
@Suite(.serialized) struct SocketConformanceTests {
    /// The far end of each connection the kit makes, so that `completeOperation` can write to it.
    final class Peers: Sendable {
        private let ends = Locked<[ObjectIdentifier: Int32]>([:])
        func add(_ connection: SocketConnection, _ fd: Int32) {
            ends.withLock { $0[ObjectIdentifier(connection)] = fd }
        }
        func end(of connection: SocketConnection) -> Int32? { ends.withLock { $0[ObjectIdentifier(connection)] } }
        func closeAll() { for fd in ends.withLock({ Array($0.values) }) { close(fd) } }
    }

    @Test func socketConnectionPassesTheKit() async throws {
        let listener = LoopbackPort(listen: 64)
        let (listenerFD, port) = (listener.fd, listener.port)
        let peers = Peers()
        let kit = AdapterConformance<SocketConnection>(
            "SocketConnection",
            make: { scope in
                let connection = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
                peers.add(connection, accept(listenerFD, nil, nil))
                return connection
            },
            blockingOperation: { connection in _ = try await connection.read(upTo: 1) },
            completeOperation: { connection in
                var byte: UInt8 = 1
                _ = write(peers.end(of: connection) ?? -1, &byte, 1)
            },
            ownedDescriptors: { connection in connection.ownedDescriptors },
            exchange: { connection, token in
                // The request goes out through the adapter; the test's end echoes it back.
                try await connection.write(token + "\n")
                let peer = peers.end(of: connection) ?? -1
                var buffer = [UInt8](repeating: 0, count: 256)
                let count = read(peer, &buffer, buffer.count)  // on loopback the line is there once write returned
                _ = write(peer, buffer, max(count, 0))
                return try await connection.readLine() ?? ""
            }
        )
        let report = try await runConformance(kit)
        peers.closeAll()
        print(report)
        #expect(report.passed, "\(report)")
    }
}
