import Glibc
@_spi(Testing) import ResourceKit
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
    /// `bodyRan` is set when the operation's body starts (the operation was not refused).
    func readInOperation(
        _ pipe: PipeResource, _ handle: ResourceHandle, _ hook: Hook, deadline: ContinuousClock.Instant? = nil,
        bodyRan: Locked<Bool>? = nil
    )
        -> Task<UInt8, any Error>
    {
        Task {
            try await withResourceOperation(boundTo: handle, deadline: deadline, onCancel: hook.record) {
                bodyRan?.withLock { $0 = true }
                return try await pipe.readByte(boundTo: handle)
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
        try await withRegisteredPipe { _, pipe, handle in
            // A deadline that passes before the body starts refuses the operation without the hook: right, but
            // not what this test is about. The deadline is absolute, so a slow start (every suite starting at
            // once under the thread sanitizer) can pre-empt it: then the attempt is repeated with a longer one.
            for allowance in [Duration.milliseconds(300), .seconds(2), .seconds(8)] {
                let hook = Hook()
                let bodyRan = Locked(false)
                let task = readInOperation(pipe, handle, hook, deadline: .now + allowance, bodyRan: bodyRan)
                let watchdog = Task {  // a deadline that never fires would block the read for ever
                    try await Task.sleep(for: allowance + .seconds(5))
                    task.cancel()
                }
                // Refused or cut short, the operation ends with the deadline's error.
                await #expect(throws: DeadlineExceededError.self) { try await task.value }
                watchdog.cancel()
                #expect(!handle.isCancelled, "an operation's deadline cancelled the whole resource")
                guard bodyRan.withLock({ $0 }) else { continue }
                // The body ran, so the deadline cut a running operation short: the hook must run (on the timer's
                // thread, possibly after the caller resumed: await it).
                try await hook.called.wait(deadline: .now + .seconds(5))
                if case .deadlineExceeded = hook.seen.first {} else { Issue.record("hook saw \(hook.seen)") }
                #expect(hook.seen.count == 1)
                return
            }
            Issue.record("every attempt's deadline passed before the operation's body started")
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
        try await withRegisteredPipe { _, pipe, handle in
            // As in the deadline test above: a slow start may let the deadline pass before the inner body runs;
            // then the attempt is repeated with a longer one.
            for allowance in [Duration.milliseconds(300), .seconds(2), .seconds(8)] {
                let outer = Hook()
                let inner = Hook()
                let innerRan = Locked(false)
                let task = Task {
                    try await withResourceOperation(
                        boundTo: nil, deadline: .now + allowance, onCancel: outer.record
                    ) {
                        try await withResourceOperation(boundTo: handle, onCancel: inner.record) {
                            innerRan.withLock { $0 = true }
                            return try await pipe.readByte(boundTo: handle)
                        }
                    }
                }
                // If the deadline never reached the inner read, it would block for ever: a watchdog ends it (with
                // CancellationError, which fails the expectation below).
                let watchdog = Task {
                    try await Task.sleep(for: allowance + .seconds(5))
                    task.cancel()
                }
                await #expect(throws: DeadlineExceededError.self) { try await task.value }
                watchdog.cancel()
                guard innerRan.withLock({ $0 }) else { continue }
                // The outer deadline cut the inner operation short: both hooks run, with the deadline's reason.
                try await inner.called.wait(deadline: .now + .seconds(5))
                try await outer.called.wait(deadline: .now + .seconds(5))
                if case .deadlineExceeded = inner.seen.first {} else { Issue.record("inner hook saw \(inner.seen)") }
                if case .deadlineExceeded = outer.seen.first {} else { Issue.record("outer hook saw \(outer.seen)") }
                return
            }
            Issue.record("every attempt's deadline passed before the inner operation's body started")
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
