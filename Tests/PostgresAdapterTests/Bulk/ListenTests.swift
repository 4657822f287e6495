import PostgresActivity
@_spi(Testing) import PostgresAdapter
import PostgresTestSupport
import ResourceKit
import ResourceKitTesting
import TestSupport
import Testing

/// LISTEN/NOTIFY as a resource, against the real server.
@Suite struct ListenTests {
    static func channel() -> String { "rk channel \(UInt32.random(in: 0...UInt32.max))" }

    @Test func notificationsArriveInOrder() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let channel = Self.channel()
        try await withResourceScope("listen", registry: ResourceRegistry()) { scope in
            let listener = try await PostgresListener.listen(to: [channel], conninfo: conninfo, in: scope)
            let sender = try await PostgresConnection.connect(conninfo, in: scope)
            try await sender.execute("SELECT pg_notify($1, g::text) FROM generate_series(1, 100) AS g", [channel])
            var payloads: [String] = []
            for try await notification in listener {
                #expect(notification.channel == channel)
                #expect(notification.senderPID == sender.backendPID)
                payloads.append(notification.payload)
                if payloads.count == 100 { break }
            }
            #expect(payloads == (1...100).map(String.init))
        }
    }

    /// Behind PgBouncer in transaction mode a LISTEN sits on whichever server connection ran it, and PgBouncer
    /// drops the notifications: the listener refuses with a typed error instead of listening on nothing, and
    /// leaves nothing open.
    @Test func listenBehindATransactionPoolerIsATypedError() async throws {
        let shapes = try await ProductionShapes.shared()
        let registry = ResourceRegistry()
        try await withResourceScope("listen", registry: registry) { scope in
            await #expect {
                _ = try await PostgresListener.listen(
                    to: [Self.channel()], conninfo: shapes.conninfo(.pgbouncer), in: scope, registry: registry)
            } throws: { error in
                (error as? PostgresError)?.code == .sessionRequired
            }
            #expect(registry.liveCount == 0, "the refused listener's connection was closed")
        }
        #expect(registry.liveCount == 0)
    }

    /// A listener an outer scope owns, iterated inside a deadline scope: the iteration ends with
    /// `DeadlineExceededError` at the deadline, as a cancel of the consuming task ends it.
    @Test func iterationObeysTheBorrowingScopesDeadline() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let registry = ResourceRegistry()
        try await withResourceScope("listener owner", registry: registry) { owner in
            let listener = try await PostgresListener.listen(to: [Self.channel()], conninfo: conninfo, in: owner)
            let consumer = Task {
                try await withResourceScope("request", deadline: .now + .milliseconds(300)) { _ in
                    for try await _ in listener {}
                }
            }
            let result = await outcome(of: consumer, within: .milliseconds(300) + TimingBound.singleShot)
            #expect(result?.failure is DeadlineExceededError, "\(String(describing: result))")
            #expect(!owner.isCancelled)
        }
        #expect(registry.liveCount == 0)
    }

    /// Cancelling the consuming task ends the iteration at once, and the listening session is gone from the
    /// server (no backend listens any more).
    @Test func cancellingTheConsumerEndsTheSequenceAndTheSession() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let channel = Self.channel()
        try await withResourceScope("listen", registry: ResourceRegistry()) { scope in
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            let listener = try await PostgresListener.listen(to: [channel], conninfo: conninfo, in: scope)
            let pid = try #require(listener.backendPID)
            #expect(try await TestDatabase.backendState(pid, observer: observer) != nil)
            let received = ObservedValue(0)
            let consumer = Task { for try await _ in listener { received.update { $0 += 1 } } }
            // One notification through, so the consumer is iterating and parks for the next.
            let sender = try await PostgresConnection.connect(conninfo, in: scope)
            try await sender.execute("SELECT pg_notify($1, 'one')", [channel])
            try await until("the consumer got the first", received.values()) { $0 == 1 }
            let cancelled = ContinuousClock.now
            consumer.cancel()
            await #expect(throws: CancellationError.self) { try await consumer.value }
            #expect(ContinuousClock.now - cancelled < TimingBound.singleShot)
            let gone = try await PostgresActivityProbe(observer: observer).waitUntil(
                .gone(.pid(pid)), within: TimingBound.singleShot)
            #expect(gone != nil, "the listening session is still there")
            await #expect(throws: CancellationError.self) { _ = try await listener.next() }
        }
    }

    /// A burst nobody reads is buffered up to the bound; past it the oldest are dropped and counted.
    @Test func aBurstBeyondTheBoundDropsTheOldest() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let channel = Self.channel()
        try await withResourceScope("listen", registry: ResourceRegistry()) { scope in
            let listener = try await PostgresListener.listen(
                to: [channel], conninfo: conninfo, in: scope, bufferLimit: 10)
            let sender = try await PostgresConnection.connect(conninfo, in: scope)
            let drops = listener.droppedCountUpdates()
            try await sender.execute("SELECT pg_notify($1, g::text) FROM generate_series(1, 50) AS g", [channel])
            try await until("the reader absorbed the burst", drops) { $0 == 40 }
            var payloads: [String] = []
            for try await notification in listener {
                payloads.append(notification.payload)
                if payloads.count == 10 { break }
            }
            #expect(payloads == (41...50).map(String.init))
        }
    }

    /// The scope ending closes the listener: nothing listens afterwards.
    @Test func theScopeEndingClosesTheListener() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let registry = ResourceRegistry()
        var pid: Int32 = 0
        try await withResourceScope("listen", registry: registry) { scope in
            let listener = try await PostgresListener.listen(
                to: [Self.channel()], conninfo: conninfo, in: scope, registry: registry)
            pid = listener.backendPID ?? 0
        }
        #expect(registry.liveCount == 0)
        try await withResourceScope("observer", registry: ResourceRegistry()) { scope in
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            #expect(try await TestDatabase.backendState(pid, observer: observer) == nil)
        }
    }
}

/// The listener passes the conformance kit: its blocking operation waits for a notification; completing it
/// sends one.
@Suite(.serialized) struct ListenerConformanceTests {
    @Test func listenerPassesTheKit() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("sender", registry: ResourceRegistry()) { scope in
            let sender = try await PostgresConnection.connect(conninfo, in: scope)
            let kit = AdapterConformance<PostgresListener>(
                "PostgresListener",
                make: { scope in
                    try await PostgresListener.listen(
                        to: ["rk_kit_\(UInt32.random(in: 0...UInt32.max))"], conninfo: conninfo, in: scope)
                },
                blockingOperation: { listener in _ = try await listener.next() },
                completeOperation: { listener in
                    _ = try await sender.execute("SELECT pg_notify($1, 'done')", [listener.channels[0]])
                },
                ownedDescriptors: { listener in listener.ownedDescriptors }
                // No exchange: a listener is a sequence whose consumer owns it, and cancelling the consuming task
                // ends the listener by design (see PostgresListener), so "reuse after an operation-level cancel"
                // does not apply.
            )
            let report = try await runConformance(kit)
            print("conformance kit, PostgresListener: \(report)")
            #expect(report.passed, "\(report)")
        }
    }
}
