import Testing

@testable import ResourceKit

/// The state machine as a pure value: every event in every state.
@Suite struct CancellationStateMachineTests {
    typealias Machine = CancellationStateMachine<Int>
    let deadline = ContinuousClock.now

    @Test func aResultBeforeTheWaitIsKeptForIt() {
        var m = Machine()
        guard case .keep = m.complete() else {
            Issue.record("expected keep")
            return
        }
        #expect(m.isResolved)
        guard case .none = m.cancel(.cancelled) else {  // the result won
            Issue.record("a cancel after the result acted")
            return
        }
        guard case .resumeWithKeptResult(let w) = m.suspend(1) else {
            Issue.record("expected resumeWithKeptResult")
            return
        }
        #expect(w == 1)
        #expect(m.cancellationReason == nil)
    }

    @Test func completesNormally() {
        var m = Machine()
        guard case .start = m.suspend(1) else {
            Issue.record("expected start")
            return
        }
        guard case .none = m.startReturned() else {
            Issue.record("expected none")
            return
        }
        guard case .resume(let w) = m.complete() else {
            Issue.record("expected resume")
            return
        }
        #expect(w == 1)
        // Late cancel after completion: nothing.
        guard case .none = m.cancel(.cancelled) else {
            Issue.record("late cancel acted")
            return
        }
        #expect(m.cancellationReason == nil)
        #expect(m.isResolved)
    }

    @Test func cancelBeforeStartNeverStarts() {
        var m = Machine()
        guard case .none = m.cancel(.cancelled) else {
            Issue.record("cancel before start acted")
            return
        }
        guard case .resumeCancelled(let w, let reason) = m.suspend(7) else {
            Issue.record("expected resumeCancelled")
            return
        }
        #expect(w == 7)
        #expect(reason == .cancelled)
        // A late result is dropped.
        guard case .none = m.complete() else {
            Issue.record("late result delivered")
            return
        }
    }

    @Test func cancelWhileRunningResumesOnceAndRunsHook() {
        var m = Machine()
        _ = m.suspend(3)
        _ = m.startReturned()
        guard case .runHookThenResume(let w, let reason) = m.cancel(.deadlineExceeded(deadline)) else {
            Issue.record("expected runHookThenResume")
            return
        }
        #expect(w == 3)
        #expect(reason == .deadlineExceeded(deadline))
        guard case .none = m.cancel(.cancelled) else {
            Issue.record("second cancel acted")
            return
        }
        guard case .none = m.complete() else {
            Issue.record("result after cancel delivered")
            return
        }
        #expect(m.cancellationReason == .deadlineExceeded(deadline))
    }

    @Test func cancelWhileStartingDefersHookAndResumeUntilStartReturns() {
        var m = Machine()
        _ = m.suspend(4)
        guard case .none = m.cancel(.cancelled) else {
            Issue.record("a cancel while starting acted before the start returned")
            return
        }
        #expect(m.cancellationReason == .cancelled)
        guard case .none = m.complete() else {
            Issue.record("a result after the cancel was delivered")
            return
        }
        guard case .runHookThenResume(let w, let reason) = m.startReturned() else {
            Issue.record("expected runHookThenResume")
            return
        }
        #expect(w == 4)
        #expect(reason == .cancelled)
    }

    @Test func completeWhileStartingThenCancelIsIgnored() {
        var m = Machine()
        _ = m.suspend(5)
        guard case .resume(let w) = m.complete() else {
            Issue.record("expected resume")
            return
        }
        #expect(w == 5)
        guard case .none = m.cancel(.cancelled) else {
            Issue.record("cancel after completion acted")
            return
        }
        guard case .none = m.startReturned() else {
            Issue.record("expected none")
            return
        }
        #expect(m.cancellationReason == nil)
    }

    @Test func doubleCompletionDeliversOnce() {
        var m = Machine()
        _ = m.suspend(6)
        _ = m.startReturned()
        guard case .resume = m.complete() else {
            Issue.record("expected resume")
            return
        }
        guard case .none = m.complete() else {
            Issue.record("second completion delivered")
            return
        }
    }

    @Test func reasonErrorsAreDistinct() {
        #expect(CancellationReason.cancelled.error is CancellationError)
        #expect(CancellationReason.deadlineExceeded(deadline).error is DeadlineExceededError)
        #expect(!(CancellationReason.deadlineExceeded(deadline).error is CancellationError))
        #expect(CancellationError().isResourceCancellation)
        #expect(!(SystemError("read", errno: 5) as any Error).isResourceCancellation)
    }
}
