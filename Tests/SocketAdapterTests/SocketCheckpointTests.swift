import Glibc
import ResourceKit
import SocketAdapter
import Testing

/// Every operation is a cancellation checkpoint: started in a task that is already cancelled, it throws before
/// any side effect. Cancelled means it did not happen.
@Suite struct SocketCheckpointTests {
    /// A connected pair on loopback, both ends registered in `scope`.
    static func pair(in scope: ResourceScope) async throws -> (SocketConnection, SocketConnection) {
        let listener = try await SocketListener.bind(in: scope)
        let client = try await SocketConnection.connect(host: "127.0.0.1", port: listener.port, in: scope)
        return (client, try await listener.accept(in: scope))
    }

    @Test func aWriteInACancelledTaskSendsNothing() async throws {
        try await withResourceScope("checkpoint", registry: ResourceRegistry()) { scope in
            let (client, server) = try await Self.pair(in: scope)
            let write = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                try await client.write("never\n")
            }
            await #expect(throws: CancellationError.self) { try await write.value }
            try await client.write("first\n")
            #expect(try await server.readLine() == "first", "the cancelled write must not have sent a byte")
        }
    }

    @Test func aReadInACancelledTaskConsumesNothing() async throws {
        try await withResourceScope("checkpoint", registry: ResourceRegistry()) { scope in
            let (client, server) = try await Self.pair(in: scope)
            try await client.write("one\ntwo\n")
            #expect(try await server.readLine() == "one")  // "two" is now buffered in the read-ahead
            let read = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await server.readLine()
            }
            await #expect(throws: CancellationError.self) { try await read.value }
            let rawRead = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await server.read(upTo: 16)
            }
            await #expect(throws: CancellationError.self) { try await rawRead.value }
            try await client.write("three\n")  // so that a broken checkpoint fails here instead of hanging
            #expect(try await server.readLine() == "two", "the cancelled reads must not have consumed it")
        }
    }
}
