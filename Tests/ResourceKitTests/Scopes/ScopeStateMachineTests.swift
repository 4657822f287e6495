import TestSupport
import Testing

@testable import ResourceKit

/// A scope's state as a pure value: nothing is cancelled or closed here, only decided. `ResourceScopeTests`,
/// `ScopeEndTests` and `BorrowingScopeTests` run it through `ResourceScope`.
@Suite struct ScopeStateMachineTests {
    let registry = ResourceRegistry()

    /// A handle that nothing owns (the machine only records it), closed at the end of the test.
    func handle(inline: Bool = false) throws -> ResourceHandle {
        let resource: RegisteredResource = inline ? .synchronous(NoOpInlineResource()) : .general(NoOpResource())
        return try registry.register(
            resource, kind: ResourceKind(name: "test.machine"), label: "r", scopePath: "", deadline: nil)
    }

    static func scope(_ label: String) -> ResourceScope {
        ResourceScope(label: label, parent: nil, deadline: nil, registry: ResourceRegistry(), armsDeadline: false)
    }

    @Test func aCancelActsOnceAndHandsEveryMemberOutOnce() async throws {
        var machine = ScopeStateMachine()
        let resource = try handle()
        #expect(machine.admit(resource) == nil)
        #expect(machine.attach(Self.scope("child"), startsCancelledWhenClosed: true) == .attached)
        let wait = CancellationCell<Void>()
        #expect(machine.park(wait) == .parked)

        let work = machine.cancel(.cancelled)
        #expect(work?.handles.count == 1)
        #expect(work?.members.children.count == 1)
        #expect(work?.members.parked.count == 1)
        #expect(machine.node.memberCount == 0, "handed out by the cancel: reached once")
        let again = machine.cancel(.deadlineExceeded(.now))
        #expect(again == nil, "the first reason counts")
        #expect(machine.cancelReason == .cancelled)
        await resource.close()
    }

    @Test func whatArrivesAfterTheCancelIsRefusedOrCancelledWithItsReason() async throws {
        var machine = ScopeStateMachine()
        let deadline = ContinuousClock.now
        _ = machine.cancel(.deadlineExceeded(deadline))
        let late = try handle()
        let refusal = machine.admit(late)
        #expect(refusal == .deadlineExceeded(deadline))
        let parked = machine.park(CancellationCell<Void>())
        #expect(parked == .alreadyCancelled(.deadlineExceeded(deadline)))
        let child = machine.attach(Self.scope("child"), startsCancelledWhenClosed: true)
        #expect(child == .cancelled(.deadlineExceeded(deadline)))
        let released = machine.release(late)
        #expect(!released, "a cancelled scope gives nothing up")
        #expect(machine.handles.isEmpty)
        #expect(machine.node.memberCount == 0)
        await late.close()
    }

    @Test func anEndOfInlineResourcesFinishesAtOnceAndTakesNothingNew() async throws {
        var machine = ScopeStateMachine()
        let resource = try handle(inline: true)
        _ = machine.admit(resource)
        _ = machine.park(CancellationCell<Void>())
        let end = machine.beginEnd()
        #expect(end.finished)
        #expect(end.handles.count == 1)
        #expect(machine.phase == .finished)
        #expect(machine.handles.isEmpty)
        #expect(machine.node.memberCount == 0)
        // Finished: a registration is refused, a child scope starts cancelled, a wait or an operation is not kept,
        // a cancel does nothing.
        let late = try handle()
        let refusal = machine.admit(late)
        #expect(refusal == .cancelled)
        #expect(machine.park(CancellationCell<Void>()) == .notTracked)
        #expect(machine.attach(Self.scope("late"), startsCancelledWhenClosed: true) == .cancelled(.cancelled))
        #expect(machine.attach(Self.scope("late"), startsCancelledWhenClosed: false) == .notTracked)
        #expect(machine.node.memberCount == 0)
        let cancel = machine.cancel(.cancelled)
        #expect(cancel == nil)
        await resource.close()
        await late.close()
    }

    @Test func anEndWithAResourceThatNeedsAnAsyncCloseIsFinishingUntilItEnds() async throws {
        var machine = ScopeStateMachine()
        let general = try handle()
        _ = machine.admit(general)
        let end = machine.beginEnd()
        #expect(!end.finished)
        #expect(machine.phase == .finishing)
        // Still reachable by a cancel while its resources close, but it admits nothing new.
        let refusal = machine.admit(try handle())
        #expect(refusal == .cancelled)
        let work = machine.cancel(.cancelled)
        #expect(work?.handles.count == 1)
        machine.endFinished()
        #expect(machine.phase == .finished)
        #expect(machine.handles.isEmpty)
        await general.close()
    }

    @Test func anOpenUncancelledScopeGivesUpOneOfItsResourcesForAdoption() async throws {
        var machine = ScopeStateMachine()
        let kept = try handle()
        let adopted = try handle()
        _ = machine.admit(kept)
        _ = machine.admit(adopted)
        let released = machine.release(adopted)
        #expect(released)
        let twice = machine.release(adopted)
        #expect(!twice)
        #expect(machine.handles.count == 1)
        let child = Self.scope("child")
        _ = machine.attach(child, startsCancelledWhenClosed: true)
        machine.detach(child)
        #expect(machine.node.memberCount == 0)
        await kept.close()
        await adopted.close()
    }
}
