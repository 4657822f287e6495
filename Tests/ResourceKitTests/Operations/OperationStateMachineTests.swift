import Testing

@testable import ResourceKit

/// ``OperationStateMachine`` as a pure value: every event in every phase.
@Suite struct OperationStateMachineTests {
    typealias Machine = OperationStateMachine<Int>
    let deadline = ContinuousClock.now
    let a = ObjectIdentifier(Int.self)
    let b = ObjectIdentifier(String.self)

    @Test func runsAndFinishesWithoutACancel() {
        var m = Machine()
        #expect(m.start() == .run)
        guard case .tracked = m.add(1, id: a) else {
            Issue.record("not tracked")
            return
        }
        m.remove(id: a)
        #expect(m.waiterCount == 0)
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

    @Test func aCancelWhileRunningStopsEveryWaiterOnceWithTheFirstReason() {
        var m = Machine()
        _ = m.start()
        _ = m.add(1, id: a)
        _ = m.add(2, id: b)
        guard case .stop(let reason, let waiters) = m.cancel(.deadlineExceeded(deadline)) else {
            Issue.record("no stop")
            return
        }
        #expect(reason == .deadlineExceeded(deadline))
        #expect(waiters.sorted() == [1, 2])
        guard case .none = m.cancel(.cancelled) else {
            Issue.record("a second cancel acted")
            return
        }
        #expect(m.finish() == .deadlineExceeded(deadline))
    }

    @Test func aWaiterAddedAfterTheCancelIsCancelledAtOnce() {
        var m = Machine()
        _ = m.start()
        _ = m.cancel(.cancelled)
        guard case .cancelNow(.cancelled) = m.add(1, id: a) else {
            Issue.record("late waiter not cancelled")
            return
        }
        #expect(m.waiterCount == 0)
    }

    @Test func aWaiterAddedAfterTheEndIsIgnored() {
        var m = Machine()
        _ = m.start()
        _ = m.finish()
        guard case .ignored = m.add(1, id: a) else {
            Issue.record("tracked after the end")
            return
        }
    }
}
