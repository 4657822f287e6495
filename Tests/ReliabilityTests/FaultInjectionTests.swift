import FileAdapter
import Foundation
import Glibc
import PostgresAdapter
import PostgresActivity
import PostgresTestSupport
import ResourceKit
@_spi(Testing) import ResourceKitIO
import ResourceKitProcesses
import SocketAdapter
import ResourceKitTesting
import TestSupport
import Testing

/// Faults injected into real components: each ends in a typed error within its bound, never a hang, and
/// the system recovers. (The frozen-server faults, SIGSTOP on the backend and on the postmaster, are in
/// `PostgresFaultTests` beside this file.)
@Suite struct FaultInjectionTests {
    /// `pg_ctl stop -m immediate` mid-query: a typed connection error within 1 s; after a restart the same
    /// pool serves again, without a process restart.
    @Test func immediateShutdownMidQueryThenThePoolRecovers() async throws {
        let server = try await TestDatabase.privateCluster()
        defer { server.stopBlocking() }
        let pool = try PostgresPool(conninfo: server.conninfo, maxConnections: 2, registry: ResourceRegistry())
        let query = Task { try await pool.withConnection { try await $0.execute("SELECT pg_sleep(30)") } }
        try await withResourceScope("observer", registry: ResourceRegistry()) { scope in
            let observer = try await PostgresConnection.connect(server.conninfo, in: scope)
            let running = try await PostgresActivityProbe(observer: observer).waitUntil(
                .active(.running("SELECT pg_sleep(30)")), within: .seconds(10))
            try #require(running != nil, "the query never ran")
        }
        let killed = ContinuousClock.now
        try await server.killImmediately()
        await #expect { try await query.value } throws: { ($0 as? PostgresError)?.code == .connection }
        // Measured well under 1 s plus pg_ctl's own time; a query that missed the server's death would wait for
        // its 30 s sleep or for ever.
        #expect(
            ContinuousClock.now - killed < .seconds(1) + TimingBound.singleShot,
            "within 1 s of the server going away (plus pg_ctl's own time)")

        try await server.restart()
        let answer = try await pool.withConnection { try await $0.query("SELECT 42")[0].decode(Int.self, at: 0) }
        #expect(answer == 42)
        await pool.shutdown()
    }

    @Test func peerResetMidReadIsTyped() async throws {
        try await withResourceScope("reset", registry: ResourceRegistry()) { scope in
            let listener = try await SocketListener.bind(in: scope)
            let client = try await SocketConnection.connect(host: "127.0.0.1", port: listener.port, in: scope)
            let server = try await listener.accept(in: scope)
            let read = Task { try await client.read(upTo: 64) }
            try await until("read parked", IOReactor.shared.waitingDescriptorCounts()) { $0 > 0 }
            server.resetConnection()
            await #expect { try await read.value } throws: { ($0 as? SocketError)?.code == .connectionReset }
        }
    }

    @Test func fifoWriterThatDiesEndsTheStream() async throws {
        let path = "/tmp/rk-reliability-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).fifo"
        #expect(mkfifo(path, 0o600) == 0)
        defer { unlink(path) }
        // The writer is a child process that writes one line and dies.
        try await withResourceScope("fifo", registry: ResourceRegistry()) { scope in
            let reader = try await StreamReader.open(path: path, in: scope)
            let child = try Syscall.spawn(["/bin/sh", "-c", "printf 'last words\\n' > \(path)"])
            #expect(try await reader.readLine() == "last words")
            #expect(try await reader.readLine() == nil, "end of stream, not an error and not a hang")
            #expect(try await BlockingPool.shared.run { try Syscall.waitForExit(child) } == 0)
        }
    }

    @Test func fileDeletedWhileReadIsReadToTheEnd() async throws {
        let path = "/tmp/rk-reliability-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).dat"
        _ = FileManager.default.createFile(atPath: path, contents: Data(repeating: 7, count: 100_000))
        try await withResourceScope("deleted", registry: ResourceRegistry()) { scope in
            let reader = try await FileReader.open(path: path, chunkSize: 4096, in: scope)
            var total = try await reader.read()?.count ?? 0
            unlink(path)
            while let chunk = try await reader.read() { total += chunk.count }
            #expect(total == 100_000)
        }
    }
}
