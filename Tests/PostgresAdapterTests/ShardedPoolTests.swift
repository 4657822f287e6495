import PostgresTestSupport
import ResourceKit
import ResourceKitTesting
import Synchronization
import TestSupport
import Testing

@_spi(Testing) @testable import ResourceKitIO
@testable import PostgresAdapter

/// A pool per reactor of a group (Docs/Architecture.md, "A reactor per core"), against a real server: a task on a
/// reactor leases from that reactor's shard and stays on its thread through the query; a queued lease on a shard is
/// cancelled at once; the connections are split over the shards; bad input is refused before anything opens.
@Suite(.timeLimit(.minutes(2))) struct ShardedPoolTests {
    @Test func aTaskOnAReactorLeasesFromItsShardAndStaysOnItsThread() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let registry = ResourceRegistry()
        let group = IOReactorGroup(count: 2, name: "test.shards.local")
        defer { group.shutdown() }
        let pool = try PostgresShardedPool(
            conninfo: conninfo, maxConnections: 4, reactors: group,
            configuration: .init(registry: registry, cancelFastPath: false))
        let (answers, strays) = try await withThrowingTaskGroup(of: (Int, Int).self) { tasks in
            for task in 0..<8 {
                let reactor = group.reactors[task % 2]
                tasks.addTask(executorPreference: reactor) {
                    var (answers, strays) = (0, 0)
                    for index in 0..<10 {
                        let value = task * 100 + index
                        let answer = try await pool.withConnection { connection in
                            if connection.reactor !== reactor { strays += 1 }
                            let answer = try await connection.query("SELECT $1::int", [value])[0].decode(
                                Int.self, at: 0)
                            if !reactor.isCurrentThread { strays += 1 }
                            return answer
                        }
                        if answer == value { answers += 1 }
                    }
                    return (answers, strays)
                }
            }
            return try await tasks.reduce((0, 0)) { ($0.0 + $1.0, $0.1 + $1.1) }
        }
        #expect(answers == 80)
        #expect(strays == 0, "a lease left its reactor's shard, or a query resumed off its thread")
        #expect(pool.occupancy.map(\.waiters) == [0, 0])
        #expect(pool.occupancy.allSatisfy { $0.open >= 1 }, "a shard was never used: \(pool.occupancy)")
        await pool.shutdown()
        #expect(registry.liveCount == 0)
    }

    /// Shard 0 has one connection, held by a sleeping query; a second task on reactor 0 queues on shard 0 (not on
    /// shard 1, whose connection is free) and is cancelled: it throws at once and leaves the queue; then the
    /// sleeping query is cancelled on the server from the reactor's thread, and the shard serves again.
    /// Shared statements of tasks on reactor 0 run on shard 0 only (its drivers and its connections), and every
    /// caller gets its own answer back on its reactor's thread; shard 1 never opens a connection.
    @Test func sharedStatementsRunOnTheCallersShard() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let registry = ResourceRegistry()
        let group = IOReactorGroup(count: 2, name: "test.shards.shared")
        defer { group.shutdown() }
        let pool = try PostgresShardedPool(
            conninfo: conninfo, maxConnections: 4, reactors: group,
            configuration: .init(registry: registry, cancelFastPath: false))
        let reactor = group.reactors[0]
        let (answers, strays) = try await withThrowingTaskGroup(of: (Int, Int).self) { tasks in
            for task in 0..<16 {
                tasks.addTask(executorPreference: reactor) {
                    var (answers, strays) = (0, 0)
                    for index in 0..<10 {
                        let value = task * 100 + index
                        let answer = try await pool.query("SELECT $1::int", [value])[0].decode(Int.self, at: 0)
                        if !reactor.isCurrentThread { strays += 1 }
                        if answer == value { answers += 1 }
                    }
                    return (answers, strays)
                }
            }
            return try await tasks.reduce(into: (0, 0)) { total, one in
                total = (total.0 + one.0, total.1 + one.1)
            }
        }
        #expect(answers == 160)
        #expect(strays == 0, "a caller resumed off its reactor's thread")
        #expect(pool.shards[0].openCount > 0)
        #expect(pool.shards[1].openCount == 0, "a statement of reactor 0's tasks went to shard 1")
        await pool.shutdown()
        #expect(registry.liveCount == 0)
    }

    @Test func aQueuedLeaseOnAShardIsCancelledAtOnce() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let registry = ResourceRegistry()
        let group = IOReactorGroup(count: 2, name: "test.shards.cancel")
        defer { group.shutdown() }
        let pool = try PostgresShardedPool(
            conninfo: conninfo, maxConnections: 2, reactors: group,
            configuration: .init(registry: registry, cancelFastPath: false))
        let shard = pool.shards[0]
        let reactor = group.reactors[0]
        let sleeper = Task(executorPreference: reactor) {
            try await pool.withConnection { try await $0.execute("SELECT pg_sleep(30)") }
        }
        try await until("shard 0's connection is leased", shard.occupancyUpdates()) { $0.open == 1 && $0.idle == 0 }
        let queued = Task(executorPreference: reactor) {
            try await pool.withConnection { try await $0.query("SELECT 1").count }
        }
        try await until("a lease is queued on shard 0", shard.occupancyUpdates()) { $0.waiters == 1 }
        #expect(pool.shards[1].waiterCount == 0)
        queued.cancel()
        let ended = await outcome(of: queued)
        #expect(ended != nil, "the queued lease did not end")
        #expect(throws: CancellationError.self) { try ended?.get() }
        #expect(shard.waiterCount == 0)

        sleeper.cancel()
        let slept = await outcome(of: sleeper)
        #expect(throws: CancellationError.self) { try slept?.get() }
        let again = try await Task(executorPreference: reactor) {
            try await pool.withConnection { try await $0.query("SELECT 2")[0].decode(Int.self, at: 0) }
        }.value
        #expect(again == 2)
        await pool.shutdown()
        #expect(registry.liveCount == 0)
    }

    /// The split needs no server (connections open lazily): the first shards take the remainder, never more
    /// shards than connections, a count below one means one; every shard gets the configuration; a malformed
    /// conninfo is refused with a typed error.
    @Test func theConnectionsAreSplitOverTheShardsAndBadInputIsRefused() throws {
        let group = IOReactorGroup(count: 2, name: "test.shards.split")
        defer { group.shutdown() }
        let conninfo = "host=/nonexistent port=1 dbname=none"
        let cases: [(Int, [Int])] = [(5, [3, 2]), (4, [2, 2]), (1, [1]), (0, [1]), (-3, [1])]
        for (requested, split) in cases {
            let pool = try PostgresShardedPool(
                conninfo: conninfo, maxConnections: requested, reactors: group,
                configuration: .init(registry: ResourceRegistry(), cancelFastPath: false))
            #expect(pool.shards.map(\.maxConnections) == split, "maxConnections \(requested)")
            #expect(pool.maxConnections == split.reduce(0, +))
            #expect(pool.currentShard == nil)
        }
        // Every shard runs on the one configuration, the pipeline depth included.
        let configured = try PostgresShardedPool(
            conninfo: conninfo, maxConnections: 4, reactors: group,
            configuration: .init(
                registry: ResourceRegistry(), cancelFastPath: false, connectTimeout: .seconds(3), pipelineDepth: 3))
        #expect(configured.shards.map { $0.withMachine(\.shared.depth) } == [3, 3])
        #expect(configured.shards.map(\.connectTimeout) == [.seconds(3), .seconds(3)])
        #expect(configured.shards.allSatisfy { $0.cancelChannel == nil })
        #expect {
            _ = try PostgresShardedPool(
                conninfo: "host=127.0.0.1 password=s3cret port", maxConnections: 4, reactors: group)
        } throws: { error in
            guard let error = error as? PostgresError else { return false }
            return error.code == .invalidConfiguration && !error.description.contains("s3cret")
        }
    }
}
