import Synchronization
import Testing

@testable import ResourceKit
import ResourceKitObservation
@testable import ResourceKitIO

#if canImport(Glibc)
import Glibc
#endif

/// The one cancellation shield and the inline close.
@Suite struct ShieldTests {
    @Test func theCallersCancellationDoesNotReachTheShieldedBody() async throws {
        let entered = OneShotEvent()
        let release = OneShotEvent()
        let sawCancellation = Atomic<Bool>(true)
        let caller = Task {
            try await withCancellationShield(timeout: .seconds(10)) {
                entered.set()
                try await release.wait(deadline: .now + .seconds(10))
                sawCancellation.store(Task.isCancelled, ordering: .relaxed)
                return 42
            }
        }
        try await entered.wait(deadline: .now + .seconds(10))
        caller.cancel()
        release.set()
        #expect(try await caller.value == 42)
        #expect(sawCancellation.load(ordering: .relaxed) == false)
    }

    @Test func anOverrunThrowsShieldTimeoutError() async {
        let never = OneShotEvent()
        await #expect(throws: ShieldTimeoutError(timeout: .milliseconds(20))) {
            try await withCancellationShield(timeout: .milliseconds(20)) {
                try await never.wait(deadline: .now + .seconds(5))
            }
        }
    }

    /// A timeout is set but is not the subject: the body runs in a task of its own, which may wait seconds for a
    /// cooperative thread when every suite starts at once (thread sanitizer), so the bound is far beyond that.
    @Test func theBodysOwnErrorIsRethrown() async {
        struct Boom: Error, Equatable {}
        await #expect(throws: Boom()) {
            try await withCancellationShield(timeout: .seconds(600)) { throw Boom() }
        }
    }

    final class InlineResource: SynchronouslyClosedResource {
        let closes = Atomic<Int>(0)
        let fails: Bool
        init(fails: Bool = false) { self.fails = fails }
        func cancel() {}
        func closeSynchronously() throws {
            closes.add(1, ordering: .relaxed)
            if fails { throw ResourceKitError(.descriptorClosed, "test failure") }
        }
    }

    @Test func aSynchronousCloseRunsOnceEvenWhenTheCallerIsCancelled() async throws {
        let registry = ResourceRegistry()
        let resource = InlineResource()
        let handle = try registry.register(resource, kind: ResourceKind(name: "test.inline"), label: "inline")
        let outcome = await Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await handle.close()
        }.value
        guard case .closed = outcome else {
            Issue.record("expected .closed, got \(outcome)")
            return
        }
        #expect(resource.closes.load(ordering: .relaxed) == 1)
        guard case .alreadyClosed = await handle.close() else {
            Issue.record("a second close must not close again")
            return
        }
        #expect(resource.closes.load(ordering: .relaxed) == 1)
        #expect(registry.liveCount == 0)
    }

    @Test func aThrowingSynchronousCloseIsReportedAndCountsAsClosed() async throws {
        let registry = ResourceRegistry()
        let handle = try registry.register(
            InlineResource(fails: true), kind: ResourceKind(name: "test.inline"), label: "inline")
        guard case .failed = await handle.close() else {
            Issue.record("expected .failed")
            return
        }
        #expect(registry.liveCount == 0)
        #expect(registry.snapshot().counters["test.inline"]?.failed == 1)
    }
}
