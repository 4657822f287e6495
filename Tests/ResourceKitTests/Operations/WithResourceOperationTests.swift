import Glibc
import ResourceKit
import ResourceKitTesting
import Synchronization
import TestSupport
import Testing

/// `withResourceOperation` through real I/O (a pipe read parked in a reactor): both levels of cancellation,
/// the operation's own deadline, the checkpoint, and nesting.
@Suite struct WithResourceOperationTests {
    /// What the operation's `onCancel` saw.
    final class Hook: Sendable {
        let reasons = Locked<[CancellationReason]>([])
        let called = OneShotEvent()
        func record(_ reason: CancellationReason) {
            reasons.withLock { $0.append(reason) }
            called.set()
        }
        var seen: [CancellationReason] { reasons.withLock { $0 } }
    }

    /// Runs a read on `pipe` inside an operation in a task that does not own the scope.
    func readInOperation(
        _ pipe: PipeResource, _ handle: ResourceHandle, _ hook: Hook, deadline: ContinuousClock.Instant? = nil
    )
        -> Task<UInt8, any Error>
    {
        Task {
            try await withResourceOperation(boundTo: handle, deadline: deadline, onCancel: hook.record) {
                try await pipe.readByte(boundTo: handle)
            }
        }
    }

    /// A pipe registered in a scope, shared by the operations `body` runs.
    func withRegisteredPipe(_ body: (ResourceRegistry, PipeResource, ResourceHandle) async throws -> Void)
        async throws
    {
        let registry = ResourceRegistry()
        try await withResourceScope("shared", registry: registry) { scope in
            let pipe = try PipeResource()
            let handle = try await scope.register(pipe, kind: PipeResource.kind, label: "pipe")
            try await body(registry, pipe, handle)
        }
    }

    /// Parks a read inside an operation (in a task that does not own the scope), then runs `body`.
    func withParkedRead(
        _ body: (ResourceRegistry, PipeResource, ResourceHandle, Hook, Task<UInt8, any Error>) async throws -> Void
    ) async throws {
        try await withRegisteredPipe { registry, pipe, handle in
            let hook = Hook()
            let task = readInOperation(pipe, handle, hook)
            // Both the operation and its reactor wait count.
            try await until("the read parks", registry.operationCountUpdates()) { $0 >= 2 }
            try await body(registry, pipe, handle, hook, task)
        }
    }

    @Test func operationLevelCancelRunsTheHookAndLeavesTheResourceLive() async throws {
        try await withParkedRead { registry, pipe, handle, hook, task in
            task.cancel()
            await #expect(throws: CancellationError.self) { try await task.value }
            #expect(hook.seen == [.cancelled])
            #expect(pipe.cancelCount.load(ordering: .relaxed) == 0, "the resource's cancel() ran for an operation")
            #expect(!handle.isCancelled)
            // The resource is still usable.
            pipe.writeByte()
            let byte = try await pipe.readByte(boundTo: handle)
            #expect(byte == 1)
            #expect(await collectEvents(registry.operationCountUpdates()) { $0.last == 0 }.last == 0)
        }
    }

    @Test func resourceLevelCancelRunsTheHookThenTheResourcesCancel() async throws {
        try await withParkedRead { _, pipe, handle, hook, task in
            handle.cancel(.deadlineExceeded(.now))
            await #expect(throws: DeadlineExceededError.self) { try await task.value }
            #expect(hook.seen.count == 1)
            if case .deadlineExceeded = hook.seen.first {} else { Issue.record("hook saw \(hook.seen)") }
            #expect(pipe.cancelCount.load(ordering: .relaxed) == 1)
        }
    }

    @Test func theOperationsDeadlineSurfacesAsDeadlineExceededAndRunsTheHook() async throws {
        try await withRegisteredPipe { registry, pipe, handle in
            let hook = Hook()
            // Long enough for the read to park first on a loaded machine (a deadline that passes before the
            // body starts refuses it without the hook, which is right but not what this test is about).
            let task = readInOperation(pipe, handle, hook, deadline: .now + .seconds(1))
            try await until("the read parks", registry.operationCountUpdates()) { $0 >= 2 }
            await #expect(throws: DeadlineExceededError.self) { try await task.value }
            // The hook runs on the timer's thread, possibly after the operation's caller resumed: await it.
            try await hook.called.wait(deadline: .now + .seconds(5))
            if case .deadlineExceeded = hook.seen.first {} else { Issue.record("hook saw \(hook.seen)") }
            #expect(!handle.isCancelled, "an operation's deadline cancelled the whole resource")
        }
    }

    @Test func anOperationInACancelledTaskRunsNothing() async throws {
        try await withRegisteredPipe { _, pipe, handle in
            let hook = Hook()
            let ran = Locked(false)
            let task = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                try await withResourceOperation(boundTo: handle, onCancel: hook.record) {
                    ran.withLock { $0 = true }
                }
            }
            await #expect(throws: CancellationError.self) { try await task.value }
            let bodyRan = ran.withLock { $0 }
            #expect(!bodyRan)
            #expect(hook.seen.isEmpty, "the hook ran for an operation that never started")
        }
    }

    @Test func cancellingAnOuterOperationReachesANestedOne() async throws {
        try await withRegisteredPipe { registry, pipe, handle in
            let outer = Hook()
            let inner = Hook()
            let task = Task {
                try await withResourceOperation(
                    boundTo: nil, deadline: .now + .seconds(1), onCancel: outer.record
                ) {
                    try await withResourceOperation(boundTo: handle, onCancel: inner.record) {
                        try await pipe.readByte(boundTo: handle)
                    }
                }
            }
            // The inner operation and its wait count (the outer one is bound to no handle).
            try await until("the read parks", registry.operationCountUpdates()) { $0 >= 2 }
            await #expect(throws: DeadlineExceededError.self) { try await task.value }
            try await inner.called.wait(deadline: .now + .seconds(5))
            try await outer.called.wait(deadline: .now + .seconds(5))
            if case .deadlineExceeded = inner.seen.first {} else { Issue.record("inner hook saw \(inner.seen)") }
            if case .deadlineExceeded = outer.seen.first {} else { Issue.record("outer hook saw \(outer.seen)") }
        }
    }

    @Test func aCompletedOperationIgnoresALateCancel() async throws {
        try await withRegisteredPipe { _, pipe, handle in
            let hook = Hook()
            pipe.writeByte()
            let task = readInOperation(pipe, handle, hook)
            let byte = try await task.value
            #expect(byte == 1)
            task.cancel()
            handle.cancel()
            #expect(hook.seen.isEmpty)
        }
    }
}
