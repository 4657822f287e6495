import Testing

@testable import ResourceKit

/// A task's cancel that its cancellation handler never delivers. The runtime marks the task cancelled first and runs
/// its handlers after; a body that sees the mark in between (`Task.checkCancellation()`) and throws leaves
/// `withTaskCancellationHandler` first, and the handler then never runs. The operation must still run its `onCancel`
/// (its work outside the process is still running): found by the conformance kit's "cancels at the start" check on
/// the composed command client, which saw the server's command left blocked in a rare kit run under load
/// (that check, run by `CommandClientKitTests`, is this rule's test through real I/O).
@Suite struct PendingTaskCancelTests {
    /// What an operation's exit does when its body threw in a cancelled task, as a value: the operation's hook runs,
    /// once, and the cancel's reason is thrown; in a task that is not cancelled nothing runs.
    @Test func aThrowingBodyInACancelledTaskRunsTheHook() throws {
        let hooks = Locked<[String]>([])
        let operation = ResourceOperation(
            onCancel: { _ in hooks.withLock { $0.append("operation") } }, deadline: nil, scope: nil, handle: nil,
            task: 1)
        try operation.start()
        #expect(operation.finishThrowing(taskIsCancelled: true) == .cancelled)
        operation.cancel(.cancelled)  // the handler, late: nothing more
        #expect(hooks.withLock { $0 } == ["operation"])

        let calm = ResourceOperation(
            onCancel: { _ in hooks.withLock { $0.append("calm") } }, deadline: nil, scope: nil, handle: nil, task: 1)
        try calm.start()
        #expect(calm.finishThrowing(taskIsCancelled: false) == nil)
        #expect(hooks.withLock { $0 } == ["operation"])
    }

    /// Delivered as the handler would: from the task's entry node, top down, so an enclosing operation of the same
    /// task runs its hook first; an enclosing node of another task is not this task's to cancel.
    @Test func theCancelStartsAtTheTasksEntry() throws {
        let hooks = Locked<[String]>([])
        func operation(_ name: String, task: UInt, in parent: ResourceOperation?) throws -> ResourceOperation {
            let made = ResourceOperation(
                onCancel: { _ in hooks.withLock { $0.append(name) } }, deadline: nil, scope: nil, handle: nil,
                task: task, parentNode: parent)
            if let parent { #expect(parent.attach(made) == .attached) }
            try made.start()
            return made
        }
        let otherTask = try operation("other task's", task: 2, in: nil)
        let entry = try operation("entry", task: 1, in: otherTask)
        let inner = try operation("inner", task: 1, in: entry)
        #expect(inner.finishThrowing(taskIsCancelled: true) == .cancelled)
        #expect(hooks.withLock { $0 } == ["entry", "inner"])
    }

    /// A resource that records its `cancel()` and its close.
    final class RecordingResource: SynchronouslyClosedResource {
        let name: String
        let events: Locked<[String]>
        init(_ name: String, _ events: Locked<[String]>) {
            self.name = name
            self.events = events
        }
        func cancel() { events.withLock { $0.append("\(name) cancel") } }
        func closeSynchronously() { events.withLock { $0.append("\(name) close") } }
    }

    /// A scope whose body threw in a cancelled task cancels its resources before it closes them, as its handler
    /// would have; from its task's entry, so an enclosing scope's resources are cancelled first. In a task that is
    /// not cancelled the scope only closes.
    @Test func aScopeWhoseBodyThrewInACancelledTaskCancelsBeforeItCloses() async throws {
        let events = Locked<[String]>([])
        let kind = ResourceKind(name: "test.pending")
        let registry = ResourceRegistry()
        let entry = ResourceScope(label: "entry", parent: nil, deadline: nil, registry: registry, task: 1)
        let inner = ResourceScope(
            label: "inner", parent: entry, deadline: nil, registry: registry, task: 1, parentNode: entry)
        #expect(entry.isTaskEntry && !inner.isTaskEntry)
        try await entry.register(RecordingResource("outer", events), kind: kind, label: "outer")
        try await inner.register(RecordingResource("inner", events), kind: kind, label: "inner")
        #expect(inner.finishInlineThrowing(taskIsCancelled: true) == nil)
        #expect(events.withLock { $0 } == ["outer cancel", "inner cancel", "inner close"])
        entry.cancel()  // the handler, late: nothing more
        #expect(entry.finishInline() == nil)
        #expect(events.withLock { $0 } == ["outer cancel", "inner cancel", "inner close", "outer close"])

        let calm = ResourceScope(label: "calm", parent: nil, deadline: nil, registry: registry, task: 1)
        try await calm.register(RecordingResource("calm", events), kind: kind, label: "calm")
        #expect(calm.finishInlineThrowing(taskIsCancelled: false) == nil)
        #expect(events.withLock { $0 }.last == "calm close")
        #expect(!events.withLock { $0 }.contains("calm cancel"))
        #expect(registry.liveCount == 0)
    }
}
