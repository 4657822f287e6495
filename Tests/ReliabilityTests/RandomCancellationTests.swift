import Foundation
import Glibc
import PostgresAdapter
import PostgresActivity
import PostgresTestSupport
import ResourceKit
import ResourceKitObservation
import ResourceKitIO
import ResourceKitTesting
import SocketAdapter
import TestSupport
import Testing

/// Cancellation at random points, many times over, then a check that nothing leaked and nothing was
/// left in an unknown state.
@Suite(.serialized) struct RandomCancellationTests {
    /// Postgres queries over a pool, each cancelled before it was sent, in flight, or after it completed; every
    /// other round of the three from a task on the reactor's thread (it prefers the reactor as its executor), and
    /// every other pair of rounds as shared statements (`pool.query`: batched with other workers' statements when
    /// no connection is free), from 16 workers over 8 connections. No query, leased or shared, may fail with
    /// 57014 (a cancel meant for another statement). Afterwards: no stray 57014 on follow-up queries, no leaked
    /// descriptors, backends or registry entries.
    @Test func postgresQueriesCancelledAtRandomPoints() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let total = ReliabilityLevel.iterations(short: 600, long: 10_000)
        try await exclusively {
            let registry = ResourceRegistry()
            _ = IOReactor.shared.waitingDescriptorCount  // the shared reactor's own descriptors are not a leak
            let descriptorsBefore = DescriptorLedger.now().resourceCount
            let application = "rk-reliability-\(getpid())"
            let pool = try PostgresPool(
                conninfo: conninfo + " application_name=\(application)", maxConnections: 8, registry: registry)
            let counts = Locked(ReliabilityCounts())
            await withTaskGroup(of: Void.self) { group in
                for worker in 0..<16 {
                    group.addTask {
                        for iteration in stride(from: worker, to: total, by: 16) {
                            await Self.oneQuery(iteration, pool: pool, counts: counts)
                        }
                    }
                }
            }
            // Every pooled connection answers a follow-up without a stray 57014.
            for index in 0..<32 {
                do {
                    if index % 2 == 0 {
                        _ = try await pool.withConnection { try await $0.query("SELECT 1") }
                    } else {
                        _ = try await pool.query("SELECT 1")
                    }
                } catch let error as PostgresError where error.isQueryCanceled {
                    counts.withLock { $0.stray57014 += 1 }
                }
            }
            // The pool's own sockets, found by the client ports the server sees for our application name:
            // after shutdown none may be open. Exact in both forms, whatever other suites open meanwhile.
            let poolSockets = try await Self.socketsOf(application: application, conninfo: conninfo)
            #expect(!poolSockets.isEmpty, "the pool's sockets were not found: the leak check would prove nothing")
            await pool.shutdown()
            let totals = registry.snapshot().totals
            let stillOpen = DescriptorLedger.now().openSockets(poolSockets)
            #expect(
                stillOpen == 0,
                """
                pool sockets still open after shutdown (closes timed out: \(totals.closeTimedOut)): \
                \(DescriptorLedger.tcpTable().filter { poolSockets.contains($0.inode) })
                """)
            #expect(totals.closeTimedOut == 0, "a pool connection's close overran its bound")
            let result = counts.withLock { $0 }
            print("reliability postgres: \(result)")
            #expect(result.iterations == total)
            #expect(result.stray57014 == 0)
            #expect(result.otherErrors == 0)
            #expect(registry.liveCount == 0)
            // Other suites open descriptors concurrently in the short form; the long form runs this suite
            // alone (`--filter RandomCancellationTests`), where the count must return exactly. Leaked
            // connections also show as backends, checked below in both forms.
            let descriptorsAfter = DescriptorLedger.now().resourceCount
            print("reliability postgres: descriptors \(descriptorsBefore) before, \(descriptorsAfter) after")
            if ReliabilityLevel.isLong { #expect(descriptorsAfter <= descriptorsBefore) }
            try await withResourceScope("observer", registry: ResourceRegistry()) { scope in
                let observer = try await PostgresConnection.connect(conninfo, in: scope)
                let gone = try await PostgresActivityProbe(observer: observer).waitUntil(
                    .gone(.application(application)), within: .seconds(5))
                #expect(gone != nil, "backends left behind")
            }
        }
    }

    /// Inodes of the sockets connected to the server as `application`: their local port is a backend's client
    /// port and their peer's port the server's. Both are needed: connections to other servers (the pooler, the
    /// balancer other suites start meanwhile) may share a local port with one of these.
    static func socketsOf(application: String, conninfo: String) async throws -> Set<UInt64> {
        let (ports, serverPort) = try await withResourceScope("observer", registry: ResourceRegistry()) { scope in
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            let ports = try await observer.query(  // the probe answers pids; this asks the same view for ports
                "SELECT client_port FROM pg_stat_activity WHERE application_name = $1 AND client_port > 0",
                [application]
            ).map { try $0.decode(Int.self, at: 0) }
            let serverPort = try await observer.query("SELECT inet_server_port()").first?.decode(Int.self, at: 0)
            return (ports, serverPort)
        }
        guard let serverPort else { return [] }  // not over TCP: the caller's non-empty check fails
        return DescriptorLedger.socketInodes(localPorts: Set(ports), remotePort: serverPort)
    }

    static func oneQuery(_ iteration: Int, pool: PostgresPool, counts: Locked<ReliabilityCounts>) async {
        let mode = iteration % 3
        let shared = (iteration / 6) % 2 == 1
        let task = Task(executorPreference: (iteration / 3) % 2 == 1 ? IOReactor.shared : nil) {
            if shared { return try await pool.query("SELECT pg_sleep(0.001), $1::int", [iteration]) }
            return try await pool.withConnection {
                try await $0.query("SELECT pg_sleep(0.001), $1::int", [iteration])
            }
        }
        switch mode {
        case 0: task.cancel()  // usually before the query was sent
        case 1:
            try? await Task.sleep(for: .microseconds(Int.random(in: 0...3_000)))
            task.cancel()
        default: break
        }
        let result = await task.result
        if mode == 2 { task.cancel() }  // after completion: nothing may happen
        counts.withLock { counts in
            counts.iterations += 1
            switch result {
            case .success:
                counts.completed += 1
                if mode == 2 { counts.cancelledAfterCompletion += 1 }
            case .failure(let error as PostgresError) where error.isQueryCanceled:
                counts.stray57014 += 1
            case .failure(let error) where error is CancellationError:
                if mode == 0 { counts.cancelledEarly += 1 } else { counts.cancelledLater += 1 }
            case .failure:
                counts.otherErrors += 1
            }
        }
    }

    /// Socket reads cancelled at random points over a set of live connections; some complete with data. Every
    /// other round over the connections reads from a task on the reactor's thread.
    @Test func socketReadsCancelledAtRandomPoints() async throws {
        let total = ReliabilityLevel.iterations(short: 5_000, long: 100_000)
        try await exclusively {
            let registry = ResourceRegistry()
            _ = IOReactor.shared.waitingDescriptorCount  // the shared reactor's own descriptors are not a leak
            let descriptorsBefore = DescriptorLedger.now().resourceCount
            var completed = 0
            var cancelled = 0
            var other = 0
            try await withResourceScope("sockets", registry: registry) { scope in
                let listener = try await SocketListener.bind(in: scope)
                var pairs: [(SocketConnection, SocketConnection)] = []
                var resets = 0
                while pairs.count < 32 {
                    // A loopback connect can be reset when the machine's SYN queue overflows while other
                    // suites open thousands of sockets; that is not what this test is about: try again.
                    let client: SocketConnection
                    do {
                        client = try await SocketConnection.connect(host: "127.0.0.1", port: listener.port, in: scope)
                    } catch let error as SocketError where error.code == .connectionReset && resets < 20 {
                        resets += 1
                        continue
                    }
                    pairs.append((client, try await listener.accept(in: scope)))
                }
                for iteration in 0..<total {
                    let (client, server) = pairs[iteration % pairs.count]
                    let onReactor = (iteration / pairs.count) % 2 == 1
                    let task = Task(executorPreference: onReactor ? IOReactor.shared : nil) {
                        try await client.read(upTo: 16)
                    }
                    switch Int.random(in: 0..<4) {
                    case 0: task.cancel()
                    case 1:
                        await Task.yield()
                        task.cancel()
                    case 2:
                        try await server.write([1])
                        task.cancel()
                    default: try await server.write([1])
                    }
                    switch await task.result {
                    case .success(let bytes?) where !bytes.isEmpty: completed += 1
                    case .failure(let error) where error is CancellationError: cancelled += 1
                    default: other += 1
                    }
                }
            }
            print("reliability sockets: \(total) reads: \(completed) completed, \(cancelled) cancelled, \(other) other")
            #expect(completed + cancelled == total)
            #expect(other == 0)
            #expect(registry.liveCount == 0)
            // As above: exact in the long form (run alone); every socket is a registry entry in both forms.
            let descriptorsAfter = DescriptorLedger.now().resourceCount
            print("reliability sockets: descriptors \(descriptorsBefore) before, \(descriptorsAfter) after")
            if ReliabilityLevel.isLong { #expect(descriptorsAfter <= descriptorsBefore) }
        }
    }
}
