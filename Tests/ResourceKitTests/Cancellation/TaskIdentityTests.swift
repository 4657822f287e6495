import Foundation
import ResourceKitTesting
import Testing

@testable import ResourceKit

/// ``TaskIdentity`` reads the running task through the C shim; it must name the task exactly as
/// `withUnsafeCurrentTask` does, tell a child task from its parent, and be 0 off a task.
@Suite struct TaskIdentityTests {
    /// The task's address as Swift's own API gives it.
    static func throughSwift() -> UInt {
        withUnsafeCurrentTask { task in task.map { unsafeBitCast($0, to: UInt.self) } ?? 0 }
    }

    @Test func itNamesTheRunningTaskAsSwiftDoes() async {
        let here = TaskIdentity.current
        #expect(here != 0)
        #expect(here == Self.throughSwift())
        await Task.yield()  // the same task on whatever thread it resumes
        #expect(TaskIdentity.current == here)
    }

    @Test func aChildTaskIsAnotherTask() async {
        let parent = TaskIdentity.current
        async let child = (TaskIdentity.current, Self.throughSwift())
        let (identity, swift) = await child
        #expect(identity == swift)
        #expect(identity != parent)
        let unstructured = await Task { TaskIdentity.current }.value
        #expect(unstructured != parent && unstructured != 0)
    }

    @Test func offATaskItIsZero() async throws {
        let seen = ObservedValue<UInt?>(nil)
        let thread = Thread { seen.update { $0 = TaskIdentity.current } }
        thread.start()
        try await until("the thread read its identity", seen.values()) { $0 != nil }
        #expect(seen.value == 0)
    }
}
