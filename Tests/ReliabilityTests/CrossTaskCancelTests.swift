import Glibc
import PostgresAdapter
import PostgresActivity
import PostgresTestSupport
import ResourceKit
import ResourceKitIO
import ResourceKitTesting
import SocketAdapter
import TestSupport
import Testing

/// Operation-level cancellation across tasks: a task that does not own the scope runs a Postgres query and a
/// request/response loop on a socket, both resources shared with the scope's owner. Cancelling that task stops
/// the work outside the process (the backend is no longer active; the peer sees no further write), and
/// leaves both resources live and usable by their owner.
@Suite struct CrossTaskCancelTests {
    @Test func cancellingATaskThatDoesNotOwnTheScopeStopsItsServerSideWork() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let listener = LoopbackPort(listen: 4)
        let (listenerFD, port) = (listener.fd, listener.port)
        try await withResourceScope("owner", registry: ResourceRegistry()) { scope in
            let database = try await PostgresConnection.connect(conninfo, in: scope)
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            let probe = PostgresActivityProbe(observer: observer)
            let socket = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
            let peer = accept(listenerFD, nil, nil)
            defer { close(peer) }
            let pid = try #require(database.backendPID)

            // The worker: its own task, not the scope's owner.
            let worker = Task {
                async let query = database.execute("SELECT pg_sleep(60)")
                async let pings: Void = {
                    while true {
                        try await socket.write("ping\n")
                        _ = try await socket.readLine()
                    }
                }()
                _ = try await (query, pings)
            }
            // The peer answers the first ping only: the worker then waits for the second reply.
            #expect(try await Self.readLine(peer) == "ping")
            _ = write(peer, "pong\n", 5)
            #expect(try await Self.readLine(peer) == "ping")
            let running = try await probe.waitUntil(.active(.pid(pid)), within: .seconds(10))
            #expect(running != nil, "the query never became active")

            worker.cancel()
            await #expect(throws: CancellationError.self) { try await worker.value }
            let stopped = try await probe.waitUntil(.notActive(.pid(pid)), within: .seconds(5))
            #expect(stopped != nil, "the backend still runs the cancelled query")
            #expect(Self.pending(peer) == 0, "the peer saw a write after the cancel")

            // Neither resource was cancelled: their owner goes on using them.
            #expect(socket.handle?.isCancelled == false)
            let one = try await database.query("SELECT 1").first?.decode(Int.self, at: 0)
            #expect(one == 1)
            try await socket.write("after\n")
            #expect(try await Self.readLine(peer) == "after")
        }
    }

    /// Reads one line from a blocking descriptor, on the blocking pool (never on the cooperative pool, whose
    /// threads the worker needs to send what this waits for).
    static func readLine(_ fd: Int32) async throws -> String? {
        try await BlockingPool.shared.run {
            var line: [UInt8] = []
            var byte: UInt8 = 0
            while read(fd, &byte, 1) == 1 {
                if byte == 10 { return String(decoding: line, as: UTF8.self) }
                line.append(byte)
            }
            return nil
        }
    }

    /// Bytes waiting to be read on `fd`, without reading them.
    static func pending(_ fd: Int32) -> Int32 {
        var count: Int32 = 0
        _ = ioctl(fd, UInt(FIONREAD), &count)
        return count
    }
}
