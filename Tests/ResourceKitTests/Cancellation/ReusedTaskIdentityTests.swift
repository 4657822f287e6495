import Testing

@testable import ResourceKit

/// A task's address is reused once the task ends: a node that has ended can carry the running task's identity. A
/// member it does not take must install the task's handler itself, or the task's cancel reaches nothing.
@Suite struct ReusedTaskIdentityTests {
    @Test func anOperationUnderAnEndedNodeOfTheSameIdentityIsItsTasksEntry() throws {
        let ended = ResourceOperation(onCancel: { _ in }, deadline: nil, scope: nil, handle: nil, task: 7)
        try ended.start()
        _ = ended.finish()
        let operation = ResourceOperation(
            onCancel: { _ in }, deadline: nil, scope: nil, handle: nil, task: 7, parentNode: ended)
        let links = CancellationLinks.link(operation: operation, handle: nil, parent: ended, deadline: nil)
        defer { links.leave(operation, handle: nil) }
        #expect(links.isTaskEntry)
    }

    @Test func aWaitUnderAnEndedNodeOfTheSameIdentityIsItsTasksEntry() throws {
        let ended = ResourceOperation(onCancel: { _ in }, deadline: nil, scope: nil, handle: nil, task: 7)
        try ended.start()
        _ = ended.finish()
        let wait = CancellationCell<Int>()
        let links = CancellationLinks.link(wait: wait, handle: nil, node: ended, deadline: nil, isTaskEntry: false)
        defer { links.leave(wait, handle: nil) }
        #expect(links.isTaskEntry)
    }

    @Test func aScopeUnderAnEndedNodeOfTheSameIdentityIsItsTasksEntry() throws {
        let ended = ResourceOperation(onCancel: { _ in }, deadline: nil, scope: nil, handle: nil, task: 7)
        try ended.start()
        _ = ended.finish()
        let registry = ResourceRegistry()
        let scope = ResourceScope(
            label: "inherited", parent: nil, deadline: nil, registry: registry, task: 7, parentNode: ended)
        #expect(scope.isTaskEntry)
        #expect(scope.finishInline() == nil)

        let live = ResourceOperation(onCancel: { _ in }, deadline: nil, scope: nil, handle: nil, task: 7)
        try live.start()
        let nested = ResourceScope(
            label: "nested", parent: nil, deadline: nil, registry: registry, task: 7, parentNode: live)
        #expect(!nested.isTaskEntry, "a live node of the same task reaches it")
        #expect(nested.finishInline() == nil)
        _ = live.finish()
    }
}
