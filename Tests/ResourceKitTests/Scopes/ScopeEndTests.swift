import ResourceKitObservation
import Synchronization
import TestSupport
import Testing

@testable import ResourceKit

/// A scope's end: resources that close synchronously close inline, the others through the shielded, bounded
/// path, and the two kinds keep one order (Docs/Architecture.md, "The cost of a scope").
@Suite struct ScopeEndTests {
    let kind = ResourceKind(name: "test.scope-end", closeTimeout: .seconds(5))

    /// A ``SynchronouslyClosedResource`` that logs its close and, if asked, takes a few microseconds over it.
    final class InlineResource: SynchronouslyClosedResource {
        let name: String
        let log: CloseLog
        let busyFor: Duration
        let closes = Atomic<Int>(0)

        init(_ name: String, log: CloseLog, busyFor: Duration = .zero) {
            self.name = name
            self.log = log
            self.busyFor = busyFor
        }

        func cancel() { log.append("cancel \(name)") }

        func closeSynchronously() {
            closes.add(1, ordering: .relaxed)
            log.append("close \(name)")
            let end = ContinuousClock.now + busyFor
            while ContinuousClock.now < end {}
        }
    }

    @Test func inlineAndAsynchronousClosesKeepOneOrder() async throws {
        let registry = ResourceRegistry()
        let log = CloseLog()
        try await withResourceScope("mixed", registry: registry) { scope in
            try await scope.register(RecordingResource("a1", log: log), kind: kind, label: "a1")
            try await scope.register(InlineResource("s2", log: log), kind: kind, label: "s2")
            try await scope.register(InlineResource("s3", log: log), kind: kind, label: "s3")
            try await scope.register(RecordingResource("a4", log: log), kind: kind, label: "a4")
            try await scope.register(InlineResource("s5", log: log), kind: kind, label: "s5")
        }
        #expect(log.all == ["close s5", "close a4", "close s3", "close s2", "close a1"])
        #expect(registry.liveCount == 0)
        #expect(registry.snapshot().counters[kind.name]?.closed == 5)
    }

    @Test func aSynchronousResourceWithPartsClosesThemAfterItself() async throws {
        let registry = ResourceRegistry()
        let log = CloseLog()
        let whole = InlineResource("whole", log: log)
        try await withResourceScope("composed", registry: registry) { scope in
            let handle = try await scope.register(whole, kind: kind, label: "whole")
            try await handle.parts.register(InlineResource("part", log: log), kind: kind, label: "part")
        }
        #expect(log.all == ["close whole", "cancel part", "close part"])
        #expect(registry.liveCount == 0)
    }

    @Test func aResourceClosedInTheBodyIsNotClosedAgain() async throws {
        let registry = ResourceRegistry()
        let log = CloseLog()
        let resource = InlineResource("early", log: log)
        try await withResourceScope("early", registry: registry) { scope in
            let handle = try await scope.register(resource, kind: kind, label: "early")
            guard case .closed = await handle.close() else {
                Issue.record("the first close must close")
                return
            }
        }
        #expect(resource.closes.load(ordering: .relaxed) == 1)
        #expect(registry.snapshot().counters[kind.name]?.leaked == 0)
        #expect(registry.liveCount == 0)
    }

    /// The inline close is timed when someone reads the events (the duration is what the `closed` event carries).
    @Test func anInlineCloseIsTimedWhenItsEventIsRead() async throws {
        let registry = ResourceRegistry()
        let events = registry.events()
        try await withResourceScope("timed", registry: registry) { scope in
            try await scope.register(
                InlineResource("slow", log: CloseLog(), busyFor: .microseconds(200)), kind: kind, label: "slow")
        }
        for await event in events {
            guard case .closed(let duration) = event.what else { continue }
            #expect(duration >= .microseconds(200), "the event's duration: \(duration)")
            break
        }
    }

    @Test func aScopeOfOneResourceCanReleaseItAndTakeAnother() async throws {
        let registry = ResourceRegistry()
        let log = CloseLog()
        try await withResourceScope("release", registry: registry) { scope in
            let first = try await scope.register(InlineResource("first", log: log), kind: kind, label: "first")
            #expect(scope.release(first))
            #expect(!scope.release(first), "released twice")
            #expect(scope.resourceCount == 0)
            try await scope.register(InlineResource("second", log: log), kind: kind, label: "second")
            await first.close()
        }
        #expect(log.all == ["close first", "close second"])
    }

    /// Registers through a function that knows only `ManagedResource` (an adapter's generic helper).
    private func registerGenerically(_ resource: some ManagedResource, in scope: ResourceScope) async throws
        -> ResourceHandle
    {
        try await scope.register(resource, kind: kind, label: "generic")
    }

    /// Every way to register finds out that a resource closes synchronously: the overloads for a type known to
    /// (no run-time look-up) and the general forms (a cast), through a scope, a slot and the registry alone.
    @Test func everyRegistrationRouteFindsASynchronousClose() async throws {
        let registry = ResourceRegistry()
        let log = CloseLog()
        try await withResourceScope("routes", registry: registry) { scope in
            let erased: any ManagedResource = InlineResource("erased", log: log)
            let slot = HandleSlot()
            let handles = [
                try await scope.register(InlineResource("concrete", log: log), kind: kind, label: "concrete"),
                try await scope.register(erased, kind: kind, label: "erased"),
                try await registerGenerically(InlineResource("generic", log: log), in: scope),
                try await slot.register(InlineResource("slot", log: log), in: scope, kind: kind, label: "slot"),
                try registry.register(InlineResource("unscoped", log: log), kind: kind, label: "unscoped"),
            ]
            for handle in handles {
                #expect(handle.closeInline(timed: false) != nil, "\(handle.label) must close inline")
            }
            let asynchronous = try await scope.register(RecordingResource("async", log: log), kind: kind, label: "a")
            #expect(asynchronous.closeInline(timed: false) == nil, "a resource with an async close")
        }
        #expect(
            log.all == [
                "close concrete", "close erased", "close generic", "close slot", "close unscoped", "close async",
            ])
        #expect(registry.liveCount == 0)
    }

    private func removing(_ handle: ResourceHandle, from list: inout HandleList) -> Bool {
        list.remove(handle)
    }

    @Test func theHandleListKeepsOrderThroughRemovals() throws {
        let registry = ResourceRegistry()
        let handles = try (0..<4).map { index in
            try registry.register(InlineResource("h\(index)", log: CloseLog()), kind: kind, label: "h\(index)")
        }
        var list = HandleList()
        #expect(list.isEmpty)
        for handle in handles { list.append(handle) }
        #expect(list.map(\.label) == ["h0", "h1", "h2", "h3"])
        #expect(removing(handles[0], from: &list))
        #expect(list.map(\.label) == ["h1", "h2", "h3"])
        #expect(removing(handles[2], from: &list))
        #expect(list.map(\.label) == ["h1", "h3"])
        #expect(!removing(handles[2], from: &list))
        #expect(removing(handles[3], from: &list))
        #expect(removing(handles[1], from: &list))
        #expect(list.isEmpty)
        list.append(handles[2])
        #expect(list.map(\.label) == ["h2"])
        for handle in handles { _ = handle.closeInline(timed: false) }
        #expect(registry.liveCount == 0)
    }
}
