import Dispatch
import Glibc
@_spi(Testing) import ResourceKitIO
import Synchronization
import TestSupport
import Testing

@testable import ResourceKit

/// The one hook order (Docs/Architecture.md, "One hook order"), one test per cancel source: every stop hook the
/// cancel reaches (the resource's `cancel()`, the operation's `onCancel`, the wait's `onCancel`) has run when the
/// wait resumes, the wait's own last; its `afterCancel` runs after.
///
/// Each stop hook sleeps before it logs, so a hook that ran after the resume is missing from what the waiter saw
/// when it resumed (the waiter takes that snapshot within microseconds); a hook that ran before is in it.
/// `afterCancel` logs only once the waiter has taken its snapshot (it waits for that, at most 5 s: if it ran
/// before the resume, the waiter cannot resume, the wait times out and the snapshot shows it). Serialized: each
/// `afterCancel` holds a cooperative thread while its waiter needs one. When the task is the source, Swift lets
/// the resumed task go on only once the task's cancellation handlers returned (`afterCancel` among them), so
/// there `afterCancel` does not wait and only has to run, after the stop hooks.
@Suite(.serialized) struct HookOrderTests {
    /// The three stop hooks of the usual shape: a registered resource, an operation on it, a wait in that.
    static let everyStopHook = ["resource", "operation", "wait"]
    /// A cancel that leaves the resource alone (the operation level).
    static let operationLevel = ["operation", "wait"]

    @Test func theTask() async throws {
        let shape = HookShape(taskIsTheSource: true)
        // Owner: this test, which cancels and awaits it.
        let task = Task { try await withResourceScope("owner") { scope in try await shape.wait(owning: scope) } }
        try await shape.parked.wait()
        task.cancel()
        try await shape.expect(await task.value, Self.everyStopHook)
    }

    @Test func theTaskThroughNestedOperations() async throws {
        let shape = HookShape(taskIsTheSource: true)
        // Owner: this test, which cancels and awaits it.
        let task = Task {
            try await withResourceScope("owner") { scope in
                try await withResourceOperation(boundTo: nil, onCancel: { _ in shape.log.slowly("outer") }) {
                    try await shape.wait(owning: scope)
                }
            }
        }
        try await shape.parked.wait()
        task.cancel()
        try await shape.expect(await task.value, ["resource", "operation", "outer", "wait"])
    }

    @Test func theTaskThroughAScopeInsideAnOperation() async throws {
        let shape = HookShape(taskIsTheSource: true)
        // Owner: this test, which cancels and awaits it.
        let task = Task {
            try await withResourceOperation(boundTo: nil, onCancel: { _ in shape.log.slowly("outer") }) {
                try await withResourceScope("inner") { scope in try await shape.wait(owning: scope) }
            }
        }
        try await shape.parked.wait()
        task.cancel()
        try await shape.expect(await task.value, ["resource", "operation", "outer", "wait"])
    }

    /// A wait directly in a scope opened inside an operation, on one task: the wait keeps its own task handler,
    /// because the scope's handler, newer than the operation's, would otherwise run first and alone and resume the
    /// wait before the operation's hook ran (Docs/Architecture.md, "One route per wait").
    @Test func theTaskThroughAWaitInAScopeInsideAnOperation() async throws {
        let shape = HookShape(taskIsTheSource: true)
        // Owner: this test, which cancels and awaits it.
        let task = Task {
            try await withResourceOperation(boundTo: nil, onCancel: { _ in shape.log.slowly("outer") }) {
                try await withResourceScope("inner") { scope in
                    await shape.wait(on: try await shape.register(in: scope), inAnOperation: false)
                }
            }
        }
        try await shape.parked.wait()
        task.cancel()
        try await shape.expect(await task.value, ["resource", "outer", "wait"])
    }

    /// Stops a wait that its task's cancel did not reach, after a bound far above a working path: the resource's
    /// cancel reaches it through the handle, and the hook that logs ("resource") fails the test instead of hanging
    /// it.
    static func rescue(_ handle: ResourceHandle) -> Task<Void, Never> {
        Task { if (try? await Task.sleep(for: TimingBound.singleShot)) != nil { handle.cancel() } }
    }

    /// A wait in a scope that borrows the resource, on the scope's own task, with no operation around it: the
    /// scope's task handler reaches it as a borrower (the wait takes no handler of its own: "One route per wait").
    /// Only the wait stops (the operation level); the resource lives on.
    @Test func theTaskThroughABorrowingScope() async throws {
        let shape = HookShape(taskIsTheSource: true)
        try await withResourceScope("owner") { owner in
            let handle = try await shape.register(in: owner)
            // Owner: this test, which cancels and awaits it.
            let task = Task {
                try await withResourceScope("borrower") { _ in await shape.wait(on: handle, inAnOperation: false) }
            }
            try await shape.parked.wait()
            let rescue = Self.rescue(handle)
            task.cancel()
            try await shape.expect(await task.value, ["wait"])
            rescue.cancel()
            #expect(!handle.isCancelled, "the resource lives on")
        }
    }

    /// A wait in a child task of a borrowing scope: the scope runs on another task, whose handler the child's
    /// cancellation never runs, so the wait keeps its own handler.
    @Test func theTaskOfAWaitInAChildOfABorrowingScope() async throws {
        let shape = HookShape(taskIsTheSource: true)
        try await withResourceScope("owner") { owner in
            let handle = try await shape.register(in: owner)
            try await withResourceScope("borrower") { _ in
                // Owner: this test, which cancels and awaits it.
                let task = Task { await shape.wait(on: handle, inAnOperation: false) }
                try await shape.parked.wait()
                let rescue = Self.rescue(handle)
                task.cancel()
                try await shape.expect(await task.value, ["wait"])
                rescue.cancel()
            }
        }
    }

    @Test func theOwningScope() async throws {
        let shape = HookShape()
        let scopes = Mutex<ResourceScope?>(nil)
        // Owner: this test, which cancels the scope and awaits it.
        let task = Task {
            try await withResourceScope("owner") { scope in
                scopes.withLock { $0 = scope }
                return try await shape.wait(owning: scope)
            }
        }
        try await shape.parked.wait()
        try #require(scopes.withLock { $0 }).cancel()
        try await shape.expect(await task.value, Self.everyStopHook)
    }

    @Test func theBorrowingScope() async throws {
        let shape = HookShape()
        try await withResourceScope("owner") { owner in
            let handle = try await shape.register(in: owner)
            let borrowers = Mutex<ResourceScope?>(nil)
            // Owner: this test, which cancels the borrowing scope and awaits it.
            let task = Task {
                try await withResourceScope("borrower") { borrower in
                    borrowers.withLock { $0 = borrower }
                    return await shape.wait(on: handle)
                }
            }
            try await shape.parked.wait()
            try #require(borrowers.withLock { $0 }).cancel()
            try await shape.expect(await task.value, Self.operationLevel)
        }
    }

    @Test func theScopeDeadline() async throws {
        let shape = HookShape()
        let deadline = ContinuousClock.now + .milliseconds(100)
        // Owner: this test, which awaits it.
        let task = Task {
            try await withResourceScope("owner", deadline: deadline) { scope in try await shape.wait(owning: scope) }
        }
        try await shape.expect(await task.value, Self.everyStopHook)
    }

    @Test func theOperationDeadline() async throws {
        let shape = HookShape()
        try await withResourceScope("owner") { owner in
            let handle = try await shape.register(in: owner)
            let seen = await shape.wait(on: handle, operationDeadline: .now + .milliseconds(100))
            try await shape.expect(seen, Self.operationLevel)
        }
    }

    @Test func theWaitDeadline() async throws {
        let shape = HookShape()
        try await withResourceScope("owner") { owner in
            let handle = try await shape.register(in: owner)
            // Only the wait is cancelled: the operation ends with its error, uncancelled.
            let seen = await shape.wait(on: handle, waitDeadline: .now + .milliseconds(100))
            try await shape.expect(seen, ["wait"])
        }
    }

    @Test func theResource() async throws {
        let shape = HookShape()
        try await withResourceScope("owner") { owner in
            let handle = try await shape.register(in: owner)
            // Owner: this test, which awaits it.
            let task = Task { await shape.wait(on: handle) }
            try await shape.parked.wait()
            handle.cancel()
            try await shape.expect(await task.value, Self.everyStopHook)
        }
    }

    @Test func theOperationsTaskAlone() async throws {
        let shape = HookShape(taskIsTheSource: true)
        try await withResourceScope("owner") { owner in
            let handle = try await shape.register(in: owner)
            // Owner: this test, which cancels and awaits it. It borrows the resource: only the operation stops.
            let task = Task { await withoutResourceScope { await shape.wait(on: handle) } }
            try await shape.parked.wait()
            task.cancel()
            try await shape.expect(await task.value, Self.operationLevel)
        }
    }

    /// A stop hook that wakes the work it stops (a shutdown makes a socket readable; here the hooks complete the
    /// wait outright) cannot make the wait complete instead of the cancel: the wait was marked first.
    @Test(arguments: [false, true])
    func aHookThatWakesTheWaitDoesNotWinAgainstTheCancel(throughTheResource: Bool) async throws {
        let cell = CancellationCell<Void>()
        let parked = OneShotEvent()
        try await withResourceScope("owner") { scope in
            let resource = WakingResource(cell)
            let handle = try await scope.register(resource, kind: HookShape.kind, label: "waking")
            // Owner: this test, which cancels and awaits it.
            let task = Task {
                try await withResourceOperation(boundTo: handle, onCancel: { _ in cell.succeed(()) }) {
                    try await cell.run(boundTo: handle) { _ in parked.set() }
                }
            }
            try await parked.wait()
            if throughTheResource { handle.cancel() } else { task.cancel() }
            await #expect(throws: CancellationError.self) { try await task.value }
        }
    }

    /// The same order through real I/O: a wait on a pipe's read end in the reactor, cancelled through its task.
    @Test func aReactorWaitOnAPipe() async throws {
        let log = HookLog()
        let reactor = IOReactor(name: "test.reactor.hooks")
        defer { reactor.shutdown() }
        let pipe = try PipeResource(reactor: reactor)
        let afterRan = OneShotEvent()
        // Owner: this test, which cancels and awaits it.
        let task = Task {
            try await withResourceScope("owner") { scope in
                let handle = try await scope.register(
                    LoggedResource(pipe, log: log), kind: PipeResource.kind, label: "pipe")
                do {
                    try await withResourceOperation(boundTo: handle, onCancel: { _ in log.slowly("operation") }) {
                        _ = try await pipe.reactor.wait(
                            for: pipe.readFD, .readable, boundTo: handle, deadline: nil,
                            afterCancel: { _ in
                                log.slowly("after")
                                afterRan.set()
                            })
                    }
                } catch {}
                return log.resumed()
            }
        }
        // The wait is parked once the reactor counts the descriptor.
        for await count in pipe.reactor.waitingDescriptorCounts() where count > 0 { break }
        task.cancel()
        let seen = try await task.value
        // The task is the source: `afterCancel` has run by the time the task goes on (see the suite's comment).
        #expect(seen == ["operation", "resource", "after"])
        try await afterRan.wait()
        #expect(log.entries == ["operation", "resource", "after"])
    }
}

/// Hooks that log their names, each a little late (see ``HookOrderTests``).
final class HookLog: Sendable {
    private let log = Mutex<[String]>([])

    func slowly(_ name: String) {
        usleep(20_000)
        log.withLock { $0.append(name) }
    }

    var entries: [String] { log.withLock { $0 } }

    private let snapshotTaken = DispatchSemaphore(value: 0)

    /// The waiter resumed: what the hooks had logged by then.
    func resumed() -> [String] {
        defer { snapshotTaken.signal() }
        return entries
    }

    /// `afterCancel`: logs "after" once the waiter has resumed (``resumed()``), or a complaint if it did not
    /// within 5 s (this hook ran before the resume, and held it up).
    func afterTheResume() {
        let waited = snapshotTaken.wait(timeout: .now() + 5) == .success
        log.withLock { $0.append(waited ? "after" : "after, before the resume") }
    }
}

/// A resource whose `cancel()` completes a wait (as a shutdown wakes a read).
final class WakingResource: ManagedResource {
    let cell: CancellationCell<Void>
    init(_ cell: CancellationCell<Void>) { self.cell = cell }
    func cancel() { cell.succeed(()) }
    func close() async throws {}
}

/// A resource whose `cancel()` logs, slowly, then passes it on.
final class LoggedResource<Inner: ManagedResource>: ManagedResource {
    let inner: Inner
    let log: HookLog

    init(_ inner: Inner, log: HookLog) {
        self.inner = inner
        self.log = log
    }

    func cancel() {
        log.slowly("resource")
        inner.cancel()
    }

    func close() async throws { try await inner.close() }
}

/// A resource, an operation on it with an `onCancel`, and a wait in that with an `onCancel` and an
/// `afterCancel`: every hook logs.
struct HookShape: Sendable {
    static let kind = ResourceKind(name: "test.hooks", closeTimeout: .seconds(2))

    let log = HookLog()
    let parked = OneShotEvent()
    let afterRan = OneShotEvent()
    /// The task's own cancellation stops the wait (see ``HookOrderTests``).
    var taskIsTheSource = false

    func register(in scope: ResourceScope) async throws -> ResourceHandle {
        try await scope.register(LoggedResource(NoOpResource(), log: log), kind: Self.kind, label: "hooks")
    }

    func wait(owning scope: ResourceScope) async throws -> [String] {
        await wait(on: try await register(in: scope))
    }

    /// Waits until cancelled; returns what the hooks had logged when the wait resumed.
    /// `inAnOperation: false`: the wait alone, with no operation of the shape around it.
    func wait(
        on handle: ResourceHandle, operationDeadline: ContinuousClock.Instant? = nil,
        waitDeadline: ContinuousClock.Instant? = nil, inAnOperation: Bool = true
    ) async -> [String] {
        let wait = {
            try await CancellationCell<Void>().run(
                boundTo: handle, deadline: waitDeadline,
                onCancel: { _ in log.slowly("wait") },
                afterCancel: { [taskIsTheSource] _ in
                    if taskIsTheSource { log.slowly("after") } else { log.afterTheResume() }
                    afterRan.set()
                }
            ) { _ in parked.set() }
        }
        do {
            if inAnOperation {
                try await withResourceOperation(
                    boundTo: handle, deadline: operationDeadline, onCancel: { _ in log.slowly("operation") }, wait)
            } else {
                try await wait()
            }
        } catch {}
        return log.resumed()
    }

    /// The stop hooks had all run when the wait resumed (the wait's own last), and `afterCancel` had not; it ran
    /// after.
    func expect(_ seen: [String], _ hooks: [String]) async throws {
        try await afterRan.wait()
        let stops = taskIsTheSource && seen.last == "after" ? Array(seen.dropLast()) : seen
        #expect(stops.last == "wait", "the wait's own hook runs last, right before it resumes: \(seen)")
        #expect(stops.sorted() == hooks.sorted(), "every stop hook ran before the wait resumed: \(seen)")
        #expect(log.entries == stops + ["after"], "afterCancel ran after the resume")
    }
}
