import Synchronization
import TestSupport
import Testing

@testable import ResourceKit

/// The third level of cancellation without I/O: waits and operations on resources the calling task's innermost
/// scope does not own join that scope (Docs/Architecture.md, "Three levels of cancellation").
@Suite struct BorrowingScopeTests {
    let kind = ResourceKind(name: "test.borrowed", closeTimeout: .seconds(5))

    /// Parks until cancelled (or completed through `cell`); says when it parked.
    static func park(
        _ parked: AsyncStream<Int>.Continuation, cell: CancellationCell<Void> = CancellationCell<Void>(),
        boundTo handle: ResourceHandle? = nil, shielded: Bool = false
    ) async throws {
        try await cell.run(boundTo: handle, shielded: shielded) { _ in
            parked.yield(ResourceScope.current?.memberCount ?? -1)
        }
    }

    @Test func cancelOfTheScopeReachesAnUnboundWaitOfItsTask() async throws {
        let (parked, parking) = AsyncStream<Int>.makeStream()
        let scope = Locked<ResourceScope?>(nil)
        let task = Task {
            try await withResourceScope("request", registry: ResourceRegistry()) { request in
                scope.withLock { $0 = request }
                try await Self.park(parking)
            }
        }
        var iterator = parked.makeAsyncIterator()
        #expect(await iterator.next() == 1, "the wait joined its scope")
        scope.withLock { $0 }?.cancel()
        let result = await outcome(of: task)
        #expect(result?.failure is CancellationError, "missed by the scope's cancel: \(String(describing: result))")
    }

    @Test func theDeadlineOfTheScopeReachesAWaitOnAnOuterScopesResource() async throws {
        let registry = ResourceRegistry()
        let outer = RecordingResource("outer", log: CloseLog())
        try await withResourceScope("connection owner", registry: registry) { owner in
            let handle = try await owner.register(outer, kind: kind, label: "outer")
            let (parked, parking) = AsyncStream<Int>.makeStream()
            let scopes = AsyncStream<ResourceScope>.makeStream()
            // The deadline fires when the test says (what the scope's timer does), so that it lands on the parked
            // wait however slowly the machine starts the task.
            let deadline = ContinuousClock.now + .seconds(3600)
            let request = Task {
                try await withResourceScope("request", deadline: deadline) { scope in
                    scopes.continuation.yield(scope)
                    try await Self.park(parking, boundTo: handle)
                }
            }
            var iterator = parked.makeAsyncIterator()
            #expect(await iterator.next() == 1, "the wait joined the request scope, which does not own it")
            var scopeIterator = scopes.stream.makeAsyncIterator()
            await scopeIterator.next()?.cancel(.deadlineExceeded(deadline))
            let result = await outcome(of: request)
            #expect(result?.failure is DeadlineExceededError, "\(String(describing: result))")
            // The operation level: the resource lives on, its adapter's cancel() never ran.
            #expect(!handle.isCancelled)
            let cancels = outer.cancelCount.load(ordering: .relaxed)
            #expect(cancels == 0)
            #expect(!owner.isCancelled)
        }
        #expect(registry.liveCount == 0)
    }

    /// A wait parks on its task's innermost node whether or not that scope owns the resource: one route from the
    /// scope, the tree's (Docs/Architecture.md, "The cancel tree"). The resource's own set holds it too, for the
    /// resource's cancel and close. (Until the tree, a wait on the scope's own resource did not join the scope and
    /// was reached through the handle only; this asserted that internal route.)
    @Test func aWaitOnTheScopesOwnResourceParksOnTheScopeAndIsInTheResourcesSet() async throws {
        try await withResourceScope("owner", registry: ResourceRegistry()) { owner in
            let handle = try await owner.register(RecordingResource("own", log: CloseLog()), kind: kind, label: "own")
            let (parked, parking) = AsyncStream<Int>.makeStream()
            let cell = CancellationCell<Void>()
            async let waited: Void = Self.park(parking, cell: cell, boundTo: handle)
            var iterator = parked.makeAsyncIterator()
            #expect(await iterator.next() == 1, "parked on the scope")
            #expect(handle.trackedCount == 1, "in the resource's set")
            cell.succeed(())
            try await waited
            #expect(owner.memberCount == 0)
            #expect(handle.trackedCount == 0)
        }
    }

    @Test func shieldedWaitsAndWorkWithoutAScopeAreNotReached() async throws {
        let (parked, parking) = AsyncStream<Int>.makeStream()
        let cells = (CancellationCell<Void>(), CancellationCell<Void>())
        let scope = Locked<ResourceScope?>(nil)
        let task = Task {
            try await withResourceScope("request", registry: ResourceRegistry()) { request in
                scope.withLock { $0 = request }
                async let shielded: Void = Self.park(parking, cell: cells.0, shielded: true)
                async let owned: Void = withoutResourceScope { try await Self.park(parking, cell: cells.1) }
                try await shielded
                try await owned
            }
        }
        var iterator = parked.makeAsyncIterator()
        _ = await iterator.next()
        _ = await iterator.next()
        let request = try #require(scope.withLock { $0 })
        #expect(request.memberCount == 0)
        request.cancel()
        #expect(!cells.0.isCancelled)
        #expect(!cells.1.isCancelled)
        cells.0.succeed(())
        cells.1.succeed(())
        try await task.value
    }

    @Test func anOperationOnABorrowedResourceStopsAtTheOperationLevelWithTheScopesReason() async throws {
        let registry = ResourceRegistry()
        let resource = RecordingResource("shared", log: CloseLog())
        let hookReasons = Locked<[CancellationReason]>([])
        try await withResourceScope("owner", registry: registry) { owner in
            let handle = try await owner.register(resource, kind: kind, label: "shared")
            let deadline = ContinuousClock.now + .seconds(3600)
            let (parked, parking) = AsyncStream<Int>.makeStream()
            let scopes = AsyncStream<ResourceScope>.makeStream()
            let request = Task {
                try await withResourceScope("request", deadline: deadline) { scope in
                    scopes.continuation.yield(scope)
                    try await withResourceOperation(
                        boundTo: handle, onCancel: { reason in hookReasons.withLock { $0.append(reason) } }
                    ) {
                        #expect(handle.operationDeadline == deadline, "the borrowing scope's deadline is carried")
                        try await Self.park(parking, boundTo: handle)
                    }
                }
            }
            var iterator = parked.makeAsyncIterator()
            #expect(await iterator.next() == 1, "the operation joined, the wait inside it did not join again")
            var scopeIterator = scopes.stream.makeAsyncIterator()
            await scopeIterator.next()?.cancel(.deadlineExceeded(deadline))  // what the scope's timer does
            let result = await outcome(of: request)
            #expect(result?.failure is DeadlineExceededError, "\(String(describing: result))")
            #expect(hookReasons.withLock { $0 } == [.deadlineExceeded(deadline)])
            #expect(!handle.isCancelled)
            let cancels = resource.cancelCount.load(ordering: .relaxed)
            #expect(cancels == 0)
        }
        #expect(registry.liveCount == 0)
    }

    @Test func aParentsCancelReachesTheBorrowersOfItsChildren() async throws {
        let (parked, parking) = AsyncStream<Int>.makeStream()
        let scope = Locked<ResourceScope?>(nil)
        let task = Task {
            try await withResourceScope("parent", registry: ResourceRegistry()) { parent in
                scope.withLock { $0 = parent }
                try await withResourceScope("child") { _ in try await Self.park(parking) }
            }
        }
        var iterator = parked.makeAsyncIterator()
        _ = await iterator.next()
        try #require(scope.withLock { $0 }).cancel()
        let result = await outcome(of: task)
        #expect(result?.failure is CancellationError, "\(String(describing: result))")
    }

    @Test func aWaitStartedInACancelledScopeNeverStarts() async throws {
        let started = Atomic<Bool>(false)
        await #expect(throws: CancellationError.self) {
            try await withResourceScope("cancelled", registry: ResourceRegistry()) { scope in
                scope.cancel()
                try await CancellationCell<Void>().run { _ in started.store(true, ordering: .relaxed) }
            }
        }
        let didStart = started.load(ordering: .relaxed)
        #expect(!didStart)
    }
}
