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

/// The shipped listener passes the kit: its operation is `accept`, blocked on an idle listener.
@Suite(.serialized) struct SocketListenerConformanceTests {
    /// The clients the test connects (so that a blocked `accept` completes), closed at the end.
    final class Clients: Sendable {
        private let fds = Locked<[Int32]>([])
        func connect(to port: Int) {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            _ = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            fds.withLock { $0.append(fd) }
        }
        func closeAll() { for fd in fds.withLock({ $0 }) { close(fd) } }
    }

    @Test func socketListenerPassesTheKit() async throws {
        let clients = Clients()
        let kit = AdapterConformance<SocketListener>(
            "SocketListener",
            make: { scope in try await SocketListener.bind(in: scope) },
            // The accepted connection belongs to a scope of the operation's own, closed when it returns.
            blockingOperation: { listener in
                try await withResourceScope("accepted") { scope in _ = try await listener.accept(in: scope) }
            },
            completeOperation: { listener in clients.connect(to: listener.port) },
            ownedDescriptors: { listener in listener.ownedDescriptors }
        )
        defer { clients.closeAll() }
        let report = try await runConformance(kit)
        print(report)
        #expect(report.passed, "\(report)")
    }
}
