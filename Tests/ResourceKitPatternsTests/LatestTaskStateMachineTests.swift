import Testing

@testable import ResourceKit
@testable import ResourceKitPatterns

/// The latest-task decisions as a pure value, without tasks or I/O.
@Suite struct LatestTaskStateMachineTests {
    @Test func newIdSupersedesSameIdDoesNothing() {
        var machine = LatestTaskStateMachine<String>()
        #expect(machine.update(id: "a", fromOwnWork: false) == .start(generation: 1, superseding: nil))
        #expect(machine.update(id: "a", fromOwnWork: false) == .unchanged)
        #expect(machine.update(id: "b", fromOwnWork: false) == .start(generation: 2, superseding: 1))
        #expect(machine.running == [1, 2], "the superseded run is still unwinding")
        #expect(machine.workFinished(generation: 1) == false)
        #expect(machine.workFinished(generation: 2) == true)
        // The current run finished: a new id supersedes nothing that runs.
        #expect(machine.update(id: "c", fromOwnWork: false) == .start(generation: 3, superseding: nil))
    }

    @Test func sameIdAfterFinishDoesNotRestart() {
        var machine = LatestTaskStateMachine<Int>()
        _ = machine.update(id: 7, fromOwnWork: false)
        _ = machine.workFinished(generation: 1)
        #expect(machine.update(id: 7, fromOwnWork: false) == .unchanged)
    }

    @Test func feedbackLoopIsRefusedButTheSameIdIsStillUnchanged() {
        var machine = LatestTaskStateMachine<Int>()
        _ = machine.update(id: 1, fromOwnWork: false)
        #expect(machine.update(id: 1, fromOwnWork: true) == .unchanged)
        #expect(machine.update(id: 2, fromOwnWork: true) == .refuseFeedbackLoop)
        #expect(machine.current?.id == 1)
    }

    @Test func closeCancelsEveryRunningGenerationOnceAndRefusesMore() {
        var machine = LatestTaskStateMachine<String>()
        _ = machine.update(id: "a", fromOwnWork: false)
        _ = machine.update(id: "b", fromOwnWork: false)
        #expect(machine.close() == [1, 2])
        #expect(machine.close() == [])
        #expect(machine.update(id: "c", fromOwnWork: false) == .refuseClosed)
    }
}
