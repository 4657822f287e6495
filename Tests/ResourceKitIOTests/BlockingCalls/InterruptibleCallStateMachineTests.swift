import Testing

@testable import ResourceKit
@testable import ResourceKitIO

/// The interruptible call's rules as a pure value: no thread, no library.
@Suite struct InterruptibleCallStateMachineTests {
    @Test func aCallCancelledWhileQueuedNeverRunsAndIsNeverInterrupted() {
        var machine = InterruptibleCallStateMachine()
        #expect(machine.cancel(.cancelled) == .none)
        #expect(machine.pickUp() == .skip)
        let due1 = machine.redeliveryDue()
        #expect(!due1)
    }

    @Test func aCancelWhileRunningInterruptsOnceAndRedeliversUntilTheCallReturns() {
        var machine = InterruptibleCallStateMachine()
        #expect(machine.pickUp() == .run)
        #expect(machine.cancel(.cancelled) == .interrupt)
        #expect(machine.cancel(.cancelled) == .none)  // a second cancel adds no delivery of its own
        let due2 = machine.redeliveryDue()
        #expect(due2)
        let due3 = machine.redeliveryDue()
        #expect(due3)
        #expect(machine.deliveries == 3)
        #expect(machine.callReturned() == .cancelled)
        // Returned: nothing may reach the library any more, neither a redelivery nor a late cancel.
        let due4 = machine.redeliveryDue()
        #expect(!due4)
        #expect(machine.cancel(.cancelled) == .none)
        #expect(machine.state == .returned(interruptedBy: .cancelled))
    }

    @Test func aCallThatReturnsBeforeAnyCancelKeepsItsResult() {
        var machine = InterruptibleCallStateMachine()
        #expect(machine.pickUp() == .run)
        #expect(machine.callReturned() == nil)
        #expect(machine.cancel(.cancelled) == .none)
        #expect(machine.state == .returned(interruptedBy: nil))
    }

    @Test func theDeadlineIsTheReasonACallReturnsWith() {
        let deadline = ContinuousClock.now
        var machine = InterruptibleCallStateMachine()
        #expect(machine.pickUp() == .run)
        #expect(machine.cancel(.deadlineExceeded(deadline)) == .interrupt)
        #expect(machine.callReturned() == .deadlineExceeded(deadline))
    }

    @Test func redeliveriesBackOffFromOneToSixtyFourMilliseconds() {
        let delays = (1...9).map { InterruptibleCallStateMachine.redeliveryDelay(after: $0) }
        #expect(delays == [1, 2, 4, 8, 16, 32, 64, 64, 64].map { Duration.milliseconds($0) })
    }
}
