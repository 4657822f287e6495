import ResourceKit
import Testing

@testable import PostgresAdapter

/// The shared statements' decisions as a pure value: no server, no I/O. Waiters are strings, a batch on the wire
/// is a number.
@Suite struct SharedStatementMachineTests {
    typealias Machine = SharedStatementMachine<String, Int>

    static func entry(_ id: UInt64, _ waiter: String) -> Machine.Entry {
        Machine.Entry(id: id, statement: PostgresStatement("SELECT \(id)"), waiter: waiter)
    }

    /// A machine (depth 8) whose driver 1 took `waiters` (ids 1, 2, ...) as its batch, not yet on the wire.
    static func taken(_ waiters: [String], maxDrivers: Int = 1) -> Machine {
        var machine = Machine(depth: 8, maxDrivers: maxDrivers)
        for (index, waiter) in waiters.enumerated() { _ = machine.submit(Self.entry(UInt64(index + 1), waiter)) }
        _ = machine.takeBatch(1, lesseesWaiting: false)
        return machine
    }

    /// The same, with the batch written and on the wire as batch 10.
    static func sent(_ waiters: [String]) -> Machine {
        var machine = taken(waiters)
        _ = machine.write(1)
        _ = machine.batchSent(1, as: 10)
        return machine
    }

    static func canceled(_ message: String) -> PostgresError {
        var error = PostgresError(.server, message)
        error.sqlState = "57014"
        return error
    }

    static let canceled: PostgresError = {
        var error = PostgresError(.server, "canceling statement due to user request")
        error.sqlState = "57014"
        return error
    }()
    static let answer = PostgresResult(rows: [], commandTag: "SELECT 1", affectedRows: 1)

    /// The first statement starts a driver; the next ones queue for it while it has not taken a batch (it is idle).
    @Test func theFirstStatementStartsADriverAndTheNextOnesWaitForIt() {
        var machine = Machine(depth: 2, maxDrivers: 4)
        #expect(machine.submit(Self.entry(1, "a")) == .startDriver(1))
        #expect(machine.submit(Self.entry(2, "b")) == .queued)
        #expect(machine.submit(Self.entry(3, "c")) == .queued)
        guard case .send(let batch) = machine.takeBatch(1, lesseesWaiting: false) else {
            Issue.record("expected a batch")
            return
        }
        #expect(batch.map(\.waiter) == ["a", "b"], "a batch holds at most `depth` statements, in order")
        // The driver is busy now: the next statement needs a driver of its own.
        #expect(machine.submit(Self.entry(4, "d")) == .startDriver(2))
    }

    /// Never more drivers than connections: the statements then wait for a driver's next batch.
    @Test func neverMoreDriversThanConnections() {
        var machine = Machine(depth: 1, maxDrivers: 1)
        #expect(machine.submit(Self.entry(1, "a")) == .startDriver(1))
        _ = machine.takeBatch(1, lesseesWaiting: false)
        #expect(machine.submit(Self.entry(2, "b")) == .queued)
        #expect(machine.driverCount == 1)
    }

    /// Each outcome goes to its own caller; a driver whose queue is empty stops and leaves no driver behind.
    @Test func outcomesGoToTheirCallersAndAnIdleDriverStops() {
        var machine = Self.taken(["a", "b"], maxDrivers: 2)
        #expect(machine.write(1).map(\.waiter) == ["a", "b"])
        let cancelNow = machine.batchSent(1, as: 10)
        #expect(!cancelNow)
        guard case .resume("a", .success) = machine.finished(1, 1, .success(Self.answer)).action,
            case .resume("b", .failure(let error)) = machine.finished(1, 2, .failure(PostgresError(.server, "no")))
                .action
        else {
            Issue.record("expected each outcome for its own caller")
            return
        }
        #expect(error.code == PostgresError.Code.server)
        let unanswered = machine.batchEnded(1)
        #expect(unanswered.isEmpty)
        guard case .stop(replacement: nil) = machine.takeBatch(1, lesseesWaiting: false) else {
            Issue.record("expected the driver to stop")
            return
        }
        #expect(machine.driverCount == 0)
    }

    /// A queued statement that is cancelled leaves the queue and is never sent.
    @Test func aQueuedStatementThatIsCancelledIsNeverSent() {
        var machine = Machine(depth: 8, maxDrivers: 1)
        _ = machine.submit(Self.entry(1, "a"))
        _ = machine.submit(Self.entry(2, "b"))
        guard case .resume("a") = machine.cancel(1, reason: .cancelled, submitted: true) else {
            Issue.record("expected the queued waiter back")
            return
        }
        guard case .send(let batch) = machine.takeBatch(1, lesseesWaiting: false) else {
            Issue.record("expected a batch")
            return
        }
        #expect(batch.map(\.waiter) == ["b"])
    }

    /// A cancel that comes before the statement was submitted is kept, and the submit is refused with it.
    @Test func aCancelBeforeTheSubmitRefusesIt() {
        var machine = Machine(depth: 8, maxDrivers: 1)
        guard case .none = machine.cancel(1, reason: .cancelled, submitted: false) else {
            Issue.record("nothing to resume yet")
            return
        }
        #expect(machine.submit(Self.entry(1, "a")) == .cancelled(.cancelled))
        #expect(machine.pending.isEmpty)
    }

    /// The head of a batch on the wire that is cancelled: its caller is resumed at once and the batch cancelled on
    /// the server; its outcome, when it comes, goes nowhere.
    @Test func theHeadOfABatchThatIsCancelledCancelsItAtOnce() {
        var machine = Self.sent(["a"])
        guard case .resumeAndCancel("a", 10) = machine.cancel(1, reason: .cancelled, submitted: true) else {
            Issue.record("expected the waiter and the batch to cancel")
            return
        }
        let resendWhileHead = machine.cancelStillWanted(1)
        #expect(resendWhileHead, "a resend is wanted while the cancelled statement is the head")
        let finish = machine.finished(1, 1, .failure(Self.canceled))
        guard case .none = finish.action, finish.cancel == nil else {
            Issue.record("the cancelled statement's outcome must go nowhere")
            return
        }
        let resendAfter = machine.cancelStillWanted(1)
        #expect(!resendAfter, "no resend once the cancelled statement answered")
    }

    /// A later statement of the batch that is cancelled: its caller is resumed at once, and the cancel goes out
    /// only when it becomes the head (sent earlier, it would stop the statement the server runs before it).
    @Test func aLaterStatementIsCancelledOnlyWhenItIsTheHead() {
        var machine = Self.sent(["a", "b"])
        guard case .resumeOnly("b") = machine.cancel(2, reason: .cancelled, submitted: true) else {
            Issue.record("expected the waiter back and no cancel yet")
            return
        }
        let resendForALaterOne = machine.cancelStillWanted(1)
        #expect(!resendForALaterOne)
        let finish = machine.finished(1, 1, .success(Self.answer))
        guard case .resume("a", .success) = finish.action else {
            Issue.record("a keeps its answer")
            return
        }
        #expect(finish.cancel == 10, "b is the head now: cancel it")
    }

    /// Cancelled after its driver took it but before the batch was written (the driver waits for an earlier cancel
    /// to settle): the caller is resumed at once, and the statement leaves the batch: it is never written.
    @Test func aStatementCancelledBeforeItsBatchIsWrittenIsNeverWritten() {
        var machine = Self.taken(["a", "b"])
        guard case .resume("a") = machine.cancel(1, reason: .cancelled, submitted: true) else {
            Issue.record("expected the waiter back, as for a queued statement")
            return
        }
        #expect(machine.write(1).map(\.waiter) == ["b"], "only what is still wanted is written")
        let cancelNow = machine.batchSent(1, as: 10)
        #expect(!cancelNow, "nothing to cancel: the cancelled statement was never written")
    }

    /// Every statement of a batch cancelled before the write: nothing is written.
    @Test func aBatchWhoseStatementsAllLeftWritesNothing() {
        var machine = Self.taken(["a"])
        _ = machine.cancel(1, reason: .cancelled, submitted: true)
        #expect(machine.write(1).isEmpty)
        #expect(machine.batchEnded(1).isEmpty)
        #expect(machine.pending.isEmpty)
    }

    /// Cancelled once written but before the batch's query id is known: resumed at once, and cancelled on the
    /// server as soon as the batch is on the wire.
    @Test func aCancelAfterTheWriteIsSentOnceTheBatchIsOnTheWire() {
        var machine = Self.taken(["a"])
        _ = machine.write(1)
        guard case .resumeOnly("a") = machine.cancel(1, reason: .cancelled, submitted: true) else {
            Issue.record("expected the waiter back")
            return
        }
        let cancelNow = machine.batchSent(1, as: 10)
        #expect(cancelNow, "the batch must be cancelled once it is on the wire")
    }

    /// A `statement_timeout` is the statement's own outcome even while a stray cancel of the pool is out.
    @Test func aStatementTimeoutIsNeverSentAgain() {
        var machine = Self.sent(["a", "b"])
        _ = machine.cancel(1, reason: .cancelled, submitted: true)
        _ = machine.finished(1, 1, .success(Self.answer))
        let timeout = Self.canceled("canceling statement due to statement timeout")
        guard case .resume("b", .failure(let error)) = machine.finished(1, 2, .failure(timeout)).action else {
            Issue.record("a timed-out statement runs once: its 57014 goes to its caller")
            return
        }
        #expect(error.isStatementTimeout)
    }

    /// A cancel meant for an earlier statement may stop any later one of the batch: each such `57014` is sent
    /// again; the target's own `57014` is its (gone) caller's.
    @Test func aCancelOfThePoolStoppingLaterStatementsSendsEachAgain() {
        var machine = Self.sent(["a", "b", "c"])
        _ = machine.cancel(1, reason: .cancelled, submitted: true)
        guard case .none = machine.finished(1, 1, .failure(Self.canceled)).action else {
            Issue.record("the target's outcome goes nowhere")
            return
        }
        guard case .sentAgain = machine.finished(1, 2, .failure(Self.canceled)).action,
            case .sentAgain = machine.finished(1, 3, .failure(Self.canceled)).action
        else {
            Issue.record("b and c were stopped by the pool's cancel")
            return
        }
        #expect(machine.pending.waiters.map(\.waiter) == ["c", "b"], "each sent again at the front of the queue")
    }

    /// A `57014` of another statement of a batch whose cancel went out is that cancel's: the statement is sent
    /// again, first, up to `maxResends` times; after that the `57014` goes to its caller.
    @Test func aStatementStoppedByAnotherOnesCancelIsSentAgain() {
        var machine = Self.sent(["a", "b"])
        _ = machine.submit(Self.entry(3, "c"))
        _ = machine.cancel(1, reason: .cancelled, submitted: true)
        _ = machine.finished(1, 1, .success(Self.answer))
        guard case .sentAgain = machine.finished(1, 2, .failure(Self.canceled)).action else {
            Issue.record("expected b to be sent again")
            return
        }
        #expect(machine.pending.waiters.map(\.waiter) == ["b", "c"], "sent again ahead of what waited")
        #expect(machine.pending.waiters.first?.resends == 1)
    }

    /// A statement already sent again `maxResends` times: its next `57014` goes to its caller.
    @Test func aStatementIsSentAgainAtMostMaxResendsTimes() {
        var machine = Machine(depth: 8, maxDrivers: 1)
        _ = machine.submit(Self.entry(1, "a"))
        var tired = Self.entry(2, "b")
        tired.resends = Machine.maxResends
        _ = machine.submit(tired)
        _ = machine.takeBatch(1, lesseesWaiting: false)
        _ = machine.write(1)
        _ = machine.batchSent(1, as: 10)
        _ = machine.cancel(1, reason: .cancelled, submitted: true)
        _ = machine.finished(1, 1, .success(Self.answer))
        guard case .resume("b", .failure(let error)) = machine.finished(1, 2, .failure(Self.canceled)).action else {
            Issue.record("past maxResends the 57014 goes to its caller")
            return
        }
        #expect(error.isQueryCanceled)
    }

    /// Without a cancel of ours out, a `57014` is the statement's own (a `statement_timeout`): it goes to its caller.
    @Test func aCanceledOutcomeWithoutOurCancelGoesToItsCaller() {
        var machine = Self.sent(["a"])
        guard case .resume("a", .failure) = machine.finished(1, 1, .failure(Self.canceled)).action else {
            Issue.record("expected the error for its caller")
            return
        }
    }

    /// A driver stops after its batch when a lessee waits for a connection of its own, and a replacement takes
    /// the statements still queued (it queues for a connection behind that lessee).
    @Test func aDriverGivesWayToALesseeAndIsReplaced() {
        var machine = Machine(depth: 1, maxDrivers: 1)
        _ = machine.submit(Self.entry(1, "a"))
        _ = machine.submit(Self.entry(2, "b"))
        _ = machine.takeBatch(1, lesseesWaiting: false)
        _ = machine.write(1)
        _ = machine.batchEnded(1)
        guard case .stop(replacement: 2?) = machine.takeBatch(1, lesseesWaiting: true) else {
            Issue.record("expected a stop with a replacement")
            return
        }
        #expect(machine.driverCount == 1)
        #expect(machine.pending.waiters.map(\.waiter) == ["b"])
    }

    /// A batch that ended without every outcome (its connection failed) hands back the unanswered waiters.
    @Test func aFailedBatchHandsBackItsUnansweredWaiters() {
        var machine = Self.sent(["a", "b"])
        _ = machine.finished(1, 1, .success(Self.answer))
        let unanswered = machine.batchEnded(1)
        #expect(unanswered == ["b"])
        #expect(machine.sentCount == 0)
    }

    /// A batch that never reached libpq goes back to the front of the queue, in order, for another driver.
    @Test func aBatchThatWasNeverSentGoesBackToTheQueue() {
        var machine = Self.taken(["a", "b"])
        _ = machine.submit(Self.entry(3, "c"))
        machine.batchNotSent(1)
        let unanswered = machine.batchEnded(1)
        #expect(unanswered.isEmpty)
        #expect(machine.pending.waiters.map(\.waiter) == ["a", "b", "c"])
        let replacement = machine.driverStopped(1)
        #expect(replacement == 2)
    }

    /// A driver that cannot lease takes the queue down with it only when it was the last one.
    @Test func aDriverThatCannotLeaseFailsTheQueueOnlyWhenItIsTheLast() {
        var machine = Machine(depth: 1, maxDrivers: 2)
        _ = machine.submit(Self.entry(1, "a"))
        _ = machine.takeBatch(1, lesseesWaiting: false)
        _ = machine.write(1)
        #expect(machine.submit(Self.entry(2, "b")) == .startDriver(2))
        let failedEarly = machine.driverFailed(2)
        #expect(failedEarly.isEmpty, "driver 1 is still there to take b")
        _ = machine.batchEnded(1)
        let replacement = machine.driverStopped(1)
        #expect(replacement == 3, "b still waits: a new driver")
        let failedLast = machine.driverFailed(3)
        #expect(failedLast == ["b"])
    }

    /// Closing hands back every queued waiter and refuses what comes after; drivers stop.
    @Test func closingHandsBackTheQueueAndRefusesNewStatements() {
        var machine = Machine(depth: 8, maxDrivers: 1)
        _ = machine.submit(Self.entry(1, "a"))
        let handedBack = machine.close()
        #expect(handedBack == ["a"])
        #expect(machine.submit(Self.entry(2, "b")) == .refuseClosed)
        guard case .stop(replacement: nil) = machine.takeBatch(1, lesseesWaiting: false) else {
            Issue.record("expected the driver to stop")
            return
        }
    }
}
