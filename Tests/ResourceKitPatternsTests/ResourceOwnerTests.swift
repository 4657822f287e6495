import ResourceKitTesting
import TestSupport
import Testing
import ResourceKitObservation

@_spi(Testing) @testable import ResourceKit
@testable import ResourceKitPatterns

@Suite struct ResourceOwnerTests {
    @Test func sameKeyRunsOnceAndRequestsObserveProgressAndOutcome() async throws {
        let owner = ResourceOwner("uploads", registry: ResourceRegistry())
        let runs = Locked(0)
        let release = OneShotEvent()
        let halfway = OneShotEvent()
        let work: @Sendable (OwnedWorkContext) async throws -> Int = { context in
            runs.withLock { $0 += 1 }
            context.report(progress: 0.5)
            halfway.set()
            try await release.wait()
            context.report(progress: 1)
            return 7
        }
        let first = try owner.run(key: "upload-1", work)
        let second = try owner.run(key: "upload-1", work)
        #expect(first === second)
        #expect(throws: ResourceKitError.self) { _ = try owner.run(key: "upload-1") { _ in "other type" } }

        try await halfway.wait(deadline: .now + .seconds(10))
        #expect(first.progress == 0.5)
        // A request that observes and is cancelled does not cancel the work.
        let observer = Task { try await first.outcome() }
        observer.cancel()
        await #expect(throws: CancellationError.self) { try await observer.value }
        #expect(!first.isFinished)

        release.set()
        #expect(try await second.outcome().value == 7)
        #expect(runs.withLock { $0 } == 1)
        // The key is freed before the work's handle closes: wait for the close, then look.
        try await until("the work's handle closed", owner.registry.liveCountUpdates()) { $0 == 0 }
        #expect(owner.runningKeys.isEmpty)
        #expect(await owner.shutdown().error == nil)
        #expect(throws: ResourceKitError.self) { _ = try owner.run(key: "late") { _ in 1 } }
    }

    /// Work can learn that its owner's shutdown began, and end at a good point within the grace instead of being
    /// cancelled at its end.
    @Test func workObservesThatShutdownBegan() async throws {
        let owner = ResourceOwner("sync", gracePeriod: .seconds(60), registry: ResourceRegistry())
        let started = OneShotEvent()
        let sawBefore = Locked<Bool?>(nil)
        let work = try owner.run(key: "sync-1") { context -> String in
            sawBefore.withLock { $0 = context.shutdownHasBegun }
            started.set()
            try await context.waitUntilShutdownBegins()
            return context.shutdownHasBegun ? "checkpointed" : "woke without a shutdown"
        }
        try await started.wait(deadline: .now + .seconds(10))
        #expect(sawBefore.withLock { $0 } == false)
        let began = ContinuousClock.now
        let report = await owner.shutdown()
        #expect(ContinuousClock.now - began < .seconds(30), "the work ended early, well inside its 60 s grace")
        #expect(report.finishedInGrace == ["sync-1"] && report.cancelled.isEmpty)
        #expect(try await work.outcome().value == "checkpointed")
    }

    /// Two stages and a watchdog: one work finishes in the grace period, one is cancelled (its pipe torn
    /// down at once), one ignores cancellation and is reported, by an event and an error.
    @Test func shutdownGraceThenCancelThenWatchdog() async throws {
        let registry = ResourceRegistry()
        let events = registry.events()
        // The grace is what the finishing work has to return in once released, and the watchdog what the
        // cancelled work has to return in: generous bounds (1 s, 2 s), because under the thread sanitizer on a
        // loaded machine a pipe read once took longer than 300 ms to return after its cancel.
        let owner = ResourceOwner(
            "sync", gracePeriod: .seconds(1), watchdog: .seconds(2), registry: registry)
        let finishSoon = OneShotEvent()
        let pipe = Locked<PipeResource?>(nil)
        let pipeRegistered = OneShotEvent()
        let letStuckEnd = OneShotEvent()

        _ = try owner.run(key: "finishes") { _ in try await finishSoon.wait() }
        _ = try owner.run(key: "cooperative") { context in
            let resource = try PipeResource()
            let handle = try await context.scope.register(resource, kind: PipeResource.kind, label: "pipe")
            pipe.withLock { $0 = resource }
            pipeRegistered.set()
            _ = try await resource.readByte(boundTo: handle)
        }
        let stuck = try owner.run(key: "ignores-cancel") { _ in
            // Escapes cancellation: what a careless integration does. Detached, because an unstructured task
            // inherits the work's scope, whose cancellation reaches its waits (the borrowing scope).
            await Task.detached { try? await letStuckEnd.wait() }.value
        }
        try await pipeRegistered.wait(deadline: .now + .seconds(10))

        let started = ContinuousClock.now
        let shutdown = Task { await owner.shutdown() }
        // Released only once the shutdown has taken its list: released before, it would finish outside any stage.
        try await owner.shutdownStarted.wait(deadline: .now + .seconds(10))
        finishSoon.set()
        let report = await shutdown.value
        let elapsed = ContinuousClock.now - started

        #expect(report.finishedInGrace == ["finishes"])
        #expect(report.cancelled == ["cooperative"])
        #expect(report.stuck == ["ignores-cancel"])
        #expect(report.error?.code == .shutdownIncomplete)
        #expect(!(report.error?.description.contains("ignores-cancel") ?? true), "keys may be user data")
        #expect(elapsed >= .milliseconds(3_000) && elapsed < .seconds(10), "grace + watchdog, took \(elapsed)")
        #expect(pipe.withLock { $0 }?.closeCount.load(ordering: .relaxed) == 1)

        let stuckEvents = await collectEvents(events) { $0.contains { $0.what == .leaked(.didNotStopAfterCancel) } }
        var sawStuck = false
        for event in stuckEvents {
            if case .leaked(.didNotStopAfterCancel) = event.what {
                sawStuck = true
                break
            }
        }
        #expect(sawStuck)
        #expect(registry.liveCount == 1, "the stuck work is still live")

        letStuckEnd.set()
        #expect(try await stuck.outcome().name == "completed")
        try await until("registry empty", registry.liveCountUpdates()) { $0 == 0 }
    }

    @Test func adoptedResourceOutlivesTheRequestAndClosesAtShutdown() async throws {
        let registry = ResourceRegistry()
        let owner = ResourceOwner("connections", registry: registry)
        let pipe = try PipeResource()
        try await withResourceScope("request", deadline: .now + .seconds(30), registry: registry) { scope in
            let handle = try await scope.register(pipe, kind: PipeResource.kind, label: "pipe")
            try owner.adopt(handle, from: scope)
            #expect(handle.deadline == nil, "the request's deadline no longer applies")
            #expect(throws: ResourceKitError.self) { try owner.adopt(handle, from: scope) }
            scope.cancel()
            #expect(!handle.isCancelled, "the request's cancellation no longer reaches it")
        }
        #expect(pipe.closeCount.load(ordering: .relaxed) == 0)
        #expect(registry.liveCount == 1)
        let report = await owner.shutdown()
        #expect(report.adoptedClosed == 1)
        #expect(pipe.closeCount.load(ordering: .relaxed) == 1)
        #expect(registry.liveCount == 0)
    }

    @Test func groupShutsOwnersDownInReverseOrderOfCreation() async throws {
        let group = ResourceOwnerGroup(registry: ResourceRegistry())
        let order = Locked<[String]>([])
        for label in ["database", "uploads", "notifications"] {
            let owner = group.makeOwner(label, gracePeriod: .zero)
            _ = try owner.run(key: "work") { _ in
                do { try await Task.sleep(for: .seconds(60)) } catch {
                    order.withLock { $0.append(label) }
                    throw error
                }
            }
        }
        let reports = await group.shutdown()
        #expect(reports.map(\.label) == ["notifications", "uploads", "database"])
        #expect(order.withLock { $0 } == ["notifications", "uploads", "database"])
    }
}
