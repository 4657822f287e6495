import Testing

@testable import ResourceKitIO

/// `ServerStop`'s rules as a pure value: which operation a stop belongs to, when its sends go on, and what an
/// operation's end does to the connection.
@Suite struct ServerStopStateMachineTests {
    typealias Machine = ServerStopStateMachine

    @Test func anOperationWithoutACancelReleasesTheConnection() throws {
        var machine = Machine()
        let operation = try machine.begin().get()
        #expect(!machine.stopOwed(operation))
        let endAction1 = machine.ended(operation, threw: false)
        #expect(endAction1 == .release)
        #expect(machine.state == .idle)
    }

    @Test func aCancelStartsTheSendsOnceAndTheThrownEndDrains() throws {
        var machine = Machine()
        let operation = try machine.begin().get()
        let startsSends2 = machine.cancelRequested(operation)
        #expect(startsSends2)
        let startsSends3 = machine.cancelRequested(operation)
        #expect(!startsSends3)  // once per operation
        #expect(machine.stopOwed(operation))
        let endAction4 = machine.ended(operation, threw: true)
        #expect(endAction4 == .drain)
        #expect(machine.stopOwed(operation))  // until the reply is read
        machine.settled(operation, clean: true)
        #expect(!machine.stopOwed(operation))
        #expect(machine.state == .idle)
    }

    @Test func anOperationThatReadItsReplyDespiteTheCancelSettlesWithoutADrain() throws {
        var machine = Machine()
        let operation = try machine.begin().get()
        _ = machine.cancelRequested(operation)
        let endAction5 = machine.ended(operation, threw: false)
        #expect(endAction5 == .settle)
    }

    @Test func aFailedDrainBreaksTheConnectionForEveryLaterOperation() throws {
        var machine = Machine()
        let operation = try machine.begin().get()
        _ = machine.cancelRequested(operation)
        _ = machine.ended(operation, threw: true)
        machine.settled(operation, clean: false)
        let begun6 = machine.begin()
        #expect(begun6 == .failure(.broken))
        let begun7 = machine.begin()
        #expect(begun7 == .failure(.broken))
    }

    /// Events of an operation that ended cannot touch the next one: a late cancel starts nothing, a late settle
    /// changes nothing, and its sends are no longer owed.
    @Test func lateEventsOfAnEndedOperationDoNotReachTheNext() throws {
        var machine = Machine()
        let first = try machine.begin().get()
        _ = machine.cancelRequested(first)
        _ = machine.ended(first, threw: true)
        machine.settled(first, clean: true)
        let second = try machine.begin().get()
        #expect(first != second)
        let startsSends8 = machine.cancelRequested(first)
        #expect(!startsSends8)
        #expect(!machine.stopOwed(first))
        machine.settled(first, clean: false)
        #expect(machine.state == .running(operation: second, stopRequested: false))
        let endAction9 = machine.ended(first, threw: true)
        #expect(endAction9 == .release)
        #expect(machine.state == .running(operation: second, stopRequested: false))
    }

    @Test func nothingBeginsAfterTheClose() throws {
        var machine = Machine()
        machine.close()
        let begun10 = machine.begin()
        #expect(begun10 == .failure(.closed))
    }
}
