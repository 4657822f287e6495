@_spi(Testing) import ResourceKit
import ResourceKitTesting
import TestSupport
import Testing

/// `OneShotEvent` through real tasks: set before or after the wait, a cancel of the waiting task, and a wait bound
/// to a resource's handle, which the resource's cancel, its scope's cancel or the scope's deadline ends.
@Suite struct OneShotEventTests {
    static let kind = ResourceKind(name: "test.one-shot-event")

    /// Runs `body` with a registered resource, and a waiting task on an event bound to its handle, parked.
    func withParkedWait(
        deadline: ContinuousClock.Instant? = nil,
        shielded: Bool = false,
        _ body: (ResourceScope, ResourceHandle, OneShotEvent, Task<Void, any Error>) async throws -> Void
    ) async throws {
        let registry = ResourceRegistry()
        try await withResourceScope("event", deadline: deadline, registry: registry) { scope in
            let handle = try await scope.register(RecordingResource("r", log: CloseLog()), kind: Self.kind, label: "r")
            let event = OneShotEvent()
            let waiter = Task { try await event.wait(boundTo: handle, shielded: shielded) }
            try await until("the wait parks", registry.operationCountUpdates()) { $0 >= 1 }
            try await body(scope, handle, event, waiter)
        }
    }

    @Test func aWaitAfterTheSetReturnsAtOnceAndASetResumesEveryWaiter() async throws {
        let early = OneShotEvent()
        early.set()
        try await early.wait()
        let late = OneShotEvent()
        let waiters = (0..<4).map { _ in Task { try await late.wait(deadline: .now + .seconds(30)) } }
        late.set()
        late.set()  // idempotent
        for waiter in waiters { try await waiter.value }
        #expect(late.isSet)
    }

    @Test func aCancelOfTheWaitingTaskEndsItAndLeavesTheEventUnset() async throws {
        let event = OneShotEvent()
        let waiter = Task { try await event.wait() }
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        #expect(!event.isSet)
    }

    @Test func theBoundResourcesCancelEndsTheWaitEvenShielded() async throws {
        try await withParkedWait(shielded: true) { _, handle, event, waiter in
            waiter.cancel()  // shielded: the task's cancel does not end it
            handle.cancel()
            await #expect(throws: CancellationError.self) { try await waiter.value }
            #expect(!event.isSet)
        }
    }

    @Test func theScopesCancelEndsABoundWait() async throws {
        try await withParkedWait { scope, _, _, waiter in
            scope.cancel()
            await #expect(throws: CancellationError.self) { try await waiter.value }
        }
    }

    @Test func aDeadlineOnTheBoundResourceEndsTheWaitAsDeadlineExceeded() async throws {
        try await withParkedWait { _, handle, _, waiter in
            handle.cancel(.deadlineExceeded(.now))
            await #expect(throws: DeadlineExceededError.self) { try await waiter.value }
        }
    }

    /// The scope's own deadline, with no wait for the park: whether the deadline passes before the wait parks or
    /// after, the wait ends with it (a handle already cancelled ends the wait before it parks).
    @Test func theScopesDeadlineEndsABoundWaitAsDeadlineExceeded() async throws {
        try await withResourceScope("event", deadline: .now + .milliseconds(100), registry: ResourceRegistry()) {
            scope in
            let handle = try await scope.register(RecordingResource("r", log: CloseLog()), kind: Self.kind, label: "r")
            await #expect(throws: DeadlineExceededError.self) { try await OneShotEvent().wait(boundTo: handle) }
        }
    }

    @Test func aSetStillResumesABoundWait() async throws {
        try await withParkedWait { _, handle, event, waiter in
            event.set()
            try await waiter.value
            #expect(!handle.isCancelled)
        }
    }

    @Test func aHandleCancelledBeforeTheWaitEndsItBeforeItParks() async throws {
        try await withResourceScope("event", registry: ResourceRegistry()) { scope in
            let handle = try await scope.register(RecordingResource("r", log: CloseLog()), kind: Self.kind, label: "r")
            handle.cancel()
            await #expect(throws: CancellationError.self) { try await OneShotEvent().wait(boundTo: handle) }
        }
    }
}
