import Testing

@testable import ResourceKit

/// ``OperationStateMachine`` as a pure value: every event in every phase. Its members are plain cells, never run.
@Suite struct OperationStateMachineTests {
    typealias Machine = OperationStateMachine
    let deadline = ContinuousClock.now

    @Test func runsAndFinishesWithoutACancel() {
        var m = Machine()
        #expect(m.start() == .run)
        let wait = CancellationCell<Void>()
        #expect(m.park(wait) == .parked)
        m.unpark(wait)
        #expect(m.node.memberCount == 0)
        #expect(m.finish() == nil)
        guard case .none = m.cancel(.cancelled) else {
            Issue.record("a cancel after the end acted")
            return
        }
    }

    @Test func aCancelBeforeTheStartRefusesTheBodyAndRunsNoHook() {
        var m = Machine()
        guard case .none = m.cancel(.deadlineExceeded(deadline)) else {
            Issue.record("a pending operation asked for the hook")
            return
        }
        #expect(m.start() == .refuse(.deadlineExceeded(deadline)))
        #expect(m.phase == .finished)
    }

    @Test func aCancelWhileRunningHandsEveryMemberOutOnceWithTheFirstReason() {
        var m = Machine()
        _ = m.start()
        _ = m.park(CancellationCell<Void>())
        _ = m.park(CancellationCell<Void>())
        let child = ResourceOperation(onCancel: { _ in }, deadline: nil, scope: nil, handle: nil, task: 0)
        #expect(m.attach(child) == .attached)
        guard case .stop(let reason, let members) = m.cancel(.deadlineExceeded(deadline)) else {
            Issue.record("no stop")
            return
        }
        #expect(reason == .deadlineExceeded(deadline))
        #expect(members.parked.count == 2)
        #expect(members.children.count == 1)
        #expect(m.node.memberCount == 0, "handed out by the cancel: reached once")
        guard case .none = m.cancel(.cancelled) else {
            Issue.record("a second cancel acted")
            return
        }
        #expect(m.finish() == .deadlineExceeded(deadline))
    }

    @Test func aMemberAddedAfterTheCancelIsRefusedWithTheReason() {
        var m = Machine()
        _ = m.start()
        _ = m.cancel(.cancelled)
        #expect(m.park(CancellationCell<Void>()) == .alreadyCancelled(.cancelled))
        let child = ResourceOperation(onCancel: { _ in }, deadline: nil, scope: nil, handle: nil, task: 0)
        #expect(m.attach(child) == .cancelled(.cancelled))
        #expect(m.node.memberCount == 0)
    }

    @Test func aMemberAddedAfterTheEndIsNotTracked() {
        var m = Machine()
        _ = m.start()
        _ = m.finish()
        #expect(m.park(CancellationCell<Void>()) == .notTracked)
        let child = ResourceOperation(onCancel: { _ in }, deadline: nil, scope: nil, handle: nil, task: 0)
        #expect(m.attach(child) == .notTracked)
    }
}
