import Testing

@testable import PostgresAdapter

/// The pool's session reset as the connection's machine sees it (Docs/Architecture.md, "Clean sessions"): owed
/// when a used session goes back to its pool, carried in front of the next statement, or run by a cleanup. No
/// server, no I/O.
@Suite struct SessionResetMachineTests {
    private let now = ContinuousClock.now

    /// One statement run and ended; the connection back with nobody holding it.
    private func usedOnce() -> ConnectionStateMachine {
        var machine = ConnectionStateMachine.keyed()
        #expect(machine.begin() == .ready)
        let id = machine.sent()
        _ = machine.resultsEnded(id)
        machine.end()
        return machine
    }

    @Test func aFreshSessionNeedsNoResetAndAnyStatementDirtiesIt() {
        var machine = ConnectionStateMachine.keyed()
        #expect(machine.sessionFresh)
        machine = usedOnce()
        #expect(!machine.sessionFresh)
        machine.markSessionFresh()
        #expect(machine.sessionFresh)
    }

    /// Owed and nothing else: an operation that carries it begins at once and takes it (once); one that cannot
    /// carry it cleans up first.
    @Test func anOwedResetIsCarriedByTheNextStatement() {
        var machine = usedOnce()
        machine.requireSessionReset()
        #expect(machine.needsCleanup)
        #expect(machine.onlySessionResetOwed)
        #expect(machine.begin(carryingReset: true) == .ready)
        let taken = machine.takeSessionReset()
        let takenAgain = machine.takeSessionReset()
        #expect(taken && !takenAgain)
        let id = machine.sent(mode: .resetPrefix(then: .statement))
        #expect(!machine.sessionFresh)  // the statement behind the reset used the session
        let leaves = machine.pipelineSynced()
        #expect(!leaves)  // the reset's sync: the statement behind it stays in libpq's pipeline mode
        #expect(machine.mode == .pipelinedStatement)
        _ = machine.resultsEnded(id)
        machine.end()
        #expect(!machine.needsCleanup)

        var other = usedOnce()
        other.requireSessionReset()
        #expect(other.begin() == .cleanUpFirst)
        #expect(other.nextCleanupStep() == .resetSession)
    }

    /// A carried reset that failed is owed again: the next operation's cleanup runs it.
    @Test func aCarriedResetThatFailedIsOwedAgain() {
        var machine = usedOnce()
        machine.requireSessionReset()
        #expect(machine.begin(carryingReset: true) == .ready)
        let taken = machine.takeSessionReset()
        #expect(taken)
        let id = machine.sent(mode: .resetPrefix(then: .statement))
        machine.requireSessionReset()  // a reset statement failed
        _ = machine.pipelineSynced()
        _ = machine.resultsEnded(id)
        machine.end()
        #expect(machine.begin(carryingReset: true) == .ready)  // carried again
        machine.end()
        #expect(machine.begin() == .cleanUpFirst)
        #expect(machine.nextCleanupStep() == .resetSession)
    }

    /// Owed behind a rollback: asyncpg's order, the cancel's end, the drain, the transaction, then the session;
    /// a statement cannot carry it past a rollback.
    @Test func anOwedResetRunsAfterTheRollback() {
        var machine = usedOnce()
        machine.requireRollback()
        machine.requireSessionReset()
        #expect(!machine.onlySessionResetOwed)
        #expect(machine.begin(carryingReset: true) == .cleanUpFirst)
        #expect(machine.nextCleanupStep() == .rollback)
        let rollback = machine.sent()
        _ = machine.resultsEnded(rollback)
        #expect(machine.nextCleanupStep() == .resetSession)
        let reset = machine.sessionResetSent()
        #expect(machine.sessionFresh)
        #expect(machine.mode == .sessionReset)
        #expect(machine.nextCleanupStep() == .drain(reset))  // on the wire as an abandoned query
        _ = machine.resultsEnded(reset)
        #expect(machine.nextCleanupStep() == .done)
        #expect(machine.sessionFresh)
    }

    /// A cancel of the previous query still in flight comes before the reset: the reset must not be the query
    /// a late cancel stops, so it is not carried either.
    @Test func anOwedResetWaitsForCancelsInFlight() throws {
        var machine = ConnectionStateMachine.keyed()
        #expect(machine.begin() == .ready)
        let id = machine.sent()
        #expect(machine.cancelRequested(id, now: now) == .send(id, .keyed))
        _ = machine.resultsEnded(id)
        machine.requireSessionReset()
        machine.end()
        #expect(machine.begin(carryingReset: true) == .cleanUpFirst)
        let settlement = try #require(machine.nextCleanupStep().settlement)
        #expect(machine.cancelFinished() == .cancelsSettled(settlement))
        #expect(machine.nextCleanupStep() == .resetSession)
    }

    /// A cleanup's own reset on the wire is nobody's query: closing the connection cancels nothing.
    @Test func closingWithAResetOnTheWireSendsNoCancel() {
        var machine = usedOnce()
        machine.requireSessionReset()
        #expect(machine.begin() == .cleanUpFirst)
        #expect(machine.nextCleanupStep() == .resetSession)
        _ = machine.sessionResetSent()
        #expect(machine.close(now: now) == .finish)
    }

    /// The settings the connection's setup asked for stay in the machine across resets: every reset applies them
    /// again (`PostgresSessionReset.sql(restoring:)` reads them from here).
    @Test func theSessionsOwnSettingsOutliveEveryReset() {
        var machine = ConnectionStateMachine.keyed()
        #expect(machine.sessionRestore.isEmpty)
        machine.sessionSettingsApplied(restoring: ["SET client_connection_check_interval = 250"])
        #expect(machine.begin() == .ready)
        let id = machine.sent()
        _ = machine.resultsEnded(id)
        machine.requireSessionReset()
        machine.end()
        #expect(machine.beginCleanup() == .cleanUp)
        #expect(machine.nextCleanupStep() == .resetSession)
        _ = machine.sessionResetSent()
        #expect(machine.sessionRestore == ["SET client_connection_check_interval = 250"])
    }

    @Test func aBrokenConnectionOwesNothing() {
        var machine = usedOnce()
        machine.requireSessionReset()
        machine.lost()
        #expect(!machine.needsCleanup)
        let taken = machine.takeSessionReset()
        #expect(!taken)
        #expect(machine.begin(carryingReset: true) == .refuseUnusable)
    }
}
