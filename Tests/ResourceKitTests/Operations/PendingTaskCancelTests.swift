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
}
