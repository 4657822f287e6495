import Synchronization
import TestSupport
import Testing

@testable import ResourceKit

/// ``CancelPass``: what a cancel that reaches several members does, in order, on the thread that finishes it:
/// every wait's `onCancel`, then the resumes (and members of an adapter's own kind), then every `afterCancel`.
@Suite struct CancelPassTests {
    /// A member of an adapter's own kind: it has no hooks; it is cancelled with the resumes.
    final class OwnMember: CancellableOperation {
        let log: Entries
        init(log: Entries) { self.log = log }
        func cancel(_ reason: CancellationReason) { log.add("own member") }
    }

    final class Entries: Sendable {
        private let entries = Mutex<[String]>([])
        func add(_ entry: String) { entries.withLock { $0.append(entry) } }
        var all: [String] { entries.withLock { $0 } }
    }

    @Test func everyStopHookThenEveryResumeThenEveryAfterCancel() async throws {
        let log = Entries()
        var cells: [CancellationCell<Void>] = []
        var tasks: [Task<String, Never>] = []
        for index in 1...3 {
            let cell = CancellationCell<Void>()
            let parked = OneShotEvent()
            cells.append(cell)
            // Owner: this test, which awaits it.
            tasks.append(
                Task {
                    do {
                        try await cell.run(
                            onCancel: { _ in log.add("stop \(index)") },
                            afterCancel: { _ in log.add("after \(index)") }
                        ) { _ in parked.set() }
                        return "completed"
                    } catch {
                        return "\(error)"
                    }
                })
            try await parked.wait()
        }
        var pass = CancelPass()
        for cell in cells { cell.reach(.cancelled, in: &pass) }
        OwnMember(log: log).reach(.cancelled, in: &pass)
        #expect(pass.pending == 4)
        #expect(log.all.isEmpty, "reaching runs no wait's hook: the pass does")
        pass.finish()
        #expect(
            log.all == [
                "stop 1", "stop 2", "stop 3", "own member", "after 1", "after 2", "after 3",
            ])
        for task in tasks { #expect(await task.value == "CancellationError()") }
    }

    /// A pass that reaches a wait while the wait's `start` runs holds it: the wait's hooks and resume come after the
    /// pass finished, whichever of the two ends first (Docs/Architecture.md, "One hook order"). Both orders on one
    /// thread, with no timing: the pass reaches the cell inside `start` and finishes either inside `start` (the pass
    /// first) or right after `begin` returned (`start` first), before the waiter's suspension is over.
    @Test(arguments: [false, true])
    func aPassThatReachesAWaitDuringItsStartHoldsIt(startReturnsFirst: Bool) async throws {
        let log = Entries()
        let cell = CancellationCell<Void>()
        let links = cell.enter(
            boundTo: nil, deadline: nil, shielded: true, onCancel: { _ in log.add("wait") },
            afterCancel: { _ in log.add("after") })
        defer { links.leave(cell, handle: nil) }
        var pass: CancelPass? = CancelPass()
        await #expect(throws: CancellationError.self) {
            _ = try await suspendOnWaiter { (waiter: CancellationWaiter) in
                cell.begin(waiter) {
                    cell.reach(.cancelled, in: &pass!)
                    log.add("reached in start")
                    if !startReturnsFirst {
                        log.add("pass finishes")
                        pass.take()?.finish()
                    }
                }
                if startReturnsFirst {
                    log.add("pass finishes")
                    pass.take()?.finish()
                }
            }
        }
        #expect(log.all == ["reached in start", "pass finishes", "wait", "after"])
    }

    /// Reaching an operation marks it and its members and collects its `onCancel` before its children's (top down);
    /// every hook runs only when the pass finishes, before the members of an adapter's own kind are cancelled; a
    /// second reach does nothing (the walk of Docs/Architecture.md, "The cancel tree").
    @Test func reachingAnOperationCollectsItsHookAboveItsChildrensAndRunsNone() {
        let log = Entries()
        let outer = ResourceOperation(
            onCancel: { _ in log.add("outer") }, deadline: nil, scope: nil, handle: nil, task: 0)
        let inner = ResourceOperation(
            onCancel: { _ in log.add("inner") }, deadline: nil, scope: nil, handle: nil, task: 0)
        try? outer.start()
        try? inner.start()
        #expect(outer.attach(inner) == .attached)
        #expect(inner.park(OwnMember(log: log)) == .parked)
        var pass = CancelPass()
        outer.reach(.cancelled, in: &pass)
        outer.reach(.cancelled, in: &pass)
        inner.reach(.cancelled, in: &pass)
        #expect(log.all.isEmpty, "reaching runs no hook: the pass does")
        #expect(pass.pending == 1)
        #expect(inner.park(OwnMember(log: log)) == .alreadyCancelled(.cancelled), "marked: a late wait is refused")
        pass.finish()
        #expect(log.all == ["outer", "inner", "own member"])
        #expect(outer.finish() == .cancelled)
        #expect(inner.finish() == .cancelled)
    }
}
