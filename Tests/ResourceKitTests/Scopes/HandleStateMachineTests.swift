import TestSupport
import Testing

@testable import ResourceKit

/// A registered resource's state as a pure value: no close, cancel or registry call is made here, only decided.
/// `ResourceScopeTests`, `ScopeEndTests`, `HandlePartsTests` and every adapter suite run it through
/// `ResourceHandle`.
@Suite struct HandleStateMachineTests {
    static func scope(_ label: String, parent: ResourceScope? = nil) -> ResourceScope {
        ResourceScope(label: label, parent: parent, deadline: nil, registry: ResourceRegistry(), armsDeadline: false)
    }

    @Test func aCancelActsOnceWithTheFirstReasonAndOnlyOnALiveResource() {
        var machine = HandleStateMachine(held: .general(NoOpResource()), deadline: nil)
        let operation = CancellationCell<Void>()
        guard case .tracked = machine.track(operation) else {
            Issue.record("a live resource tracks its operations")
            return
        }
        let work = machine.cancel(.cancelled)
        #expect(work?.operations.count == 1, "the running operation is cancelled with it")
        #expect(work?.resource != nil)
        let cancelWork = machine.cancel(.deadlineExceeded(.now))
        #expect(cancelWork == nil, "the first reason counts")
        #expect(machine.cancelReason == .cancelled)
        // An operation that starts now is cancelled at once, with the resource's reason, and not tracked.
        guard case .cancel(.cancelled) = machine.track(CancellationCell<Void>()) else {
            Issue.record("expected an immediate cancel")
            return
        }
        #expect(machine.operationCount == 1)

        var closing = HandleStateMachine(held: .general(NoOpResource()), deadline: nil)
        _ = closing.beginClose()
        let cancelWork2 = closing.cancel(.cancelled)
        #expect(cancelWork2 == nil, "a closing resource is torn down already")
        guard case .cancel(.cancelled) = closing.track(CancellationCell<Void>()) else {
            Issue.record("an operation on a closing resource is cancelled at once")
            return
        }
    }

    @Test func aCloseTakesEveryOperationOverOnceAndLetsTheResourceGoOnce() {
        var machine = HandleStateMachine(held: .general(NoOpResource()), deadline: nil)
        let first = CancellationCell<Void>()
        let second = CancellationCell<Void>()
        _ = machine.track(first)
        _ = machine.track(second)
        let untracked = machine.untrack(first)
        #expect(untracked)
        let work = machine.beginClose()
        #expect(work?.operations.count == 1, "only the one still running")
        #expect(machine.phase == .closing)
        #expect(machine.operationCount == 0)
        let untracked2 = machine.untrack(second)
        #expect(!untracked2, "taken over by the close: its end changes nothing")
        let closeWork = machine.beginClose()
        #expect(closeWork == nil, "a second close does nothing")
        let inlineClose = machine.closeInline()
        #expect(inlineClose.isAlreadyClosed)
        machine.endClose()
        #expect(machine.phase == .closed)
        #expect(machine.resource == nil)
        let abandoned = machine.abandon()
        #expect(abandoned == nil, "dropped after its close: nothing left to close")
    }

    @Test func aSynchronouslyClosedResourceWithoutPartsClosesInline() {
        var machine = HandleStateMachine(held: .synchronous(NoOpInlineResource()), deadline: nil)
        _ = machine.track(CancellationCell<Void>())
        guard case .closeCancelling(_, let cancelling) = machine.closeInline() else {
            Issue.record("expected an inline close that cancels the running operation")
            return
        }
        #expect(cancelling.count == 1)
        #expect(machine.phase == .closed)
        #expect(machine.resource == nil)
        let inlineClose = machine.closeInline()
        #expect(inlineClose.isAlreadyClosed)

        // A general resource, or one with parts, needs the asynchronous close: nothing changes.
        var general = HandleStateMachine(held: .general(NoOpResource()), deadline: nil)
        let inlineClose2 = general.closeInline()
        #expect(inlineClose2.isNotInline)
        #expect(general.phase == .live)
        var withParts = HandleStateMachine(held: .synchronous(NoOpInlineResource()), deadline: nil)
        _ = withParts.parts(making: { _ in Self.scope("parts") })
        let inlineClose3 = withParts.closeInline()
        #expect(inlineClose3.isNotInline)
        #expect(withParts.resource != nil)
    }

    @Test func adoptionDropsTheDeadlineOfALiveUncancelledResourceOnly() {
        var machine = HandleStateMachine(
            held: .general(NoOpResource()), deadline: StoredInstant(ContinuousClock.now + .seconds(5)))
        let detached = machine.detachFromScope()
        #expect(detached)
        #expect(machine.deadline == nil)
        guard case .tracked = machine.track(CancellationCell<Void>()) else {
            Issue.record("expected tracked")
            return
        }
        _ = machine.cancel(.cancelled)
        let detached2 = machine.detachFromScope()
        #expect(!detached2, "a cancelled resource cannot be adopted")
    }

    @Test func partsAreMadeOnceWithTheDeadlineAndBornCancelledOnAResourceThatIsNotLive() {
        let deadline = StoredInstant(ContinuousClock.now + .seconds(5))
        var machine = HandleStateMachine(held: .general(NoOpResource()), deadline: deadline)
        var given: StoredInstant?
        let (parts, cancelWith) = machine.parts(making: { deadline in
            given = deadline
            return Self.scope("parts")
        })
        #expect(given == deadline)
        #expect(cancelWith == nil)
        let (again, _) = machine.parts(making: { _ in
            Issue.record("made twice")
            return Self.scope("again")
        })
        #expect(again === parts)

        var cancelled = HandleStateMachine(held: .general(NoOpResource()), deadline: nil)
        _ = cancelled.cancel(.deadlineExceeded(deadline.instant))
        let made = cancelled.parts(making: { _ in Self.scope("p") })
        #expect(made.cancelWith == .deadlineExceeded(deadline.instant))
        var closing = HandleStateMachine(held: .general(NoOpResource()), deadline: nil)
        _ = closing.beginClose()
        let made2 = closing.parts(making: { _ in Self.scope("p") })
        #expect(made2.cancelWith == .cancelled)
    }

    @Test func aHandleDroppedLiveGivesItsResourceUpOnceAndARefusedDuplicateOwnsNothing() {
        var dropped = HandleStateMachine(held: .general(NoOpResource()), deadline: nil)
        let abandoned = dropped.abandon()
        #expect(abandoned != nil)
        let abandoned2 = dropped.abandon()
        #expect(abandoned2 == nil)
        #expect(dropped.phase == .closed)

        var duplicate = HandleStateMachine(held: .general(NoOpResource()), deadline: nil)
        duplicate.rejectDuplicate()
        #expect(duplicate.resource == nil)
        let abandoned3 = duplicate.abandon()
        #expect(abandoned3 == nil, "nothing to report or close")
        let closeWork = duplicate.beginClose()
        #expect(closeWork == nil)
    }
}

extension HandleStateMachine.InlineClose {
    var isAlreadyClosed: Bool {
        if case .alreadyClosed = self { return true }
        return false
    }
    var isNotInline: Bool {
        if case .notInline = self { return true }
        return false
    }
}
