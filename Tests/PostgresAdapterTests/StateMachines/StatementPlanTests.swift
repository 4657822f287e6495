import Testing

@testable import PostgresAdapter

/// How the machine plans a statement's send (Docs/Architecture.md, "Clean sessions"): whether the owed session reset
/// goes in front, under the statement's sync or apart, and the mode the statement is then read in. No server, no I/O.
@Suite struct StatementPlanTests {
    private typealias Machine = ConnectionStateMachine
    private let carried = Machine.CarriedDeadline(deadline: .now + .seconds(5))

    /// A used connection that owes its reset, held by the caller; `restoring`: the settings it applies after one.
    private func owing(restoring: [String] = []) -> Machine {
        var machine = Machine.keyed()
        machine.sessionSettingsApplied(restoring: restoring)
        #expect(machine.begin() == .ready)
        _ = machine.resultsEnded(machine.sent())
        machine.end()
        machine.requireSessionReset()
        #expect(machine.begin(carryingReset: true) == .ready)
        return machine
    }

    @Test func nothingOwedPlansTheStatementAlone() {
        var machine = Machine.keyed()
        #expect(machine.begin(carryingReset: true) == .ready)
        let plain = machine.planStatement(carryingReset: true, carried: nil, singleRow: false)
        #expect(plain == Machine.StatementPlan(reset: nil, carried: nil, mode: .simple))
        #expect(plain.mode == .simple)
        let withDeadline = machine.planStatement(carryingReset: true, carried: carried, singleRow: false)
        #expect(withDeadline.reset == nil)
        #expect(withDeadline.mode == .carried(carried))
    }

    /// Nothing to restore and no deadline: `DISCARD ALL` alone, under the statement's own sync. Taken once.
    @Test func aResetWithNothingToRestoreSharesTheStatementsSync() {
        var machine = owing()
        let plan = machine.planStatement(carryingReset: true, carried: nil, singleRow: false)
        #expect(plan.reset == .underTheStatementsSync(PostgresSessionReset.carried))
        #expect(plan.mode == .resetPrefix(then: .grouped(resetStatements: PostgresSessionReset.carried.count)))
        #expect(machine.planStatement(carryingReset: true, carried: nil, singleRow: false).reset == nil)
        let id = machine.sent(plan)
        #expect(machine.mode == plan.mode)
        #expect(machine.queryOnWire == id)
    }

    /// Settings to restore after the reset: they, and the reset, go apart under a sync of their own.
    @Test func aResetWithSettingsToRestoreIsSyncedApart() {
        let restore = ["SET client_connection_check_interval = 1000"]
        var machine = owing(restoring: restore)
        let plan = machine.planStatement(carryingReset: true, carried: nil, singleRow: false)
        #expect(plan.reset == .syncedApart(PostgresSessionReset.carried + restore))
        #expect(plan.mode == .resetPrefix(then: .statement))
        _ = machine.sent(plan)
        #expect(machine.mode == .resetPrefix(then: .statement))
    }

    /// A carried deadline's prelude must not run inside the reset's transaction: apart, and read as carried behind it.
    @Test func aResetInFrontOfACarriedDeadlineIsSyncedApart() {
        var machine = owing()
        let plan = machine.planStatement(carryingReset: true, carried: carried, singleRow: false)
        #expect(plan.reset == .syncedApart(PostgresSessionReset.carried))
        #expect(plan.mode == .resetPrefix(then: .carried(carried)))
    }

    /// An operation that does not carry the reset, or a single-row statement, leaves it owed.
    @Test func aResetNotCarriedStaysOwed() {
        var machine = owing()
        #expect(machine.planStatement(carryingReset: false, carried: nil, singleRow: false).reset == nil)
        #expect(machine.planStatement(carryingReset: true, carried: nil, singleRow: true).reset == nil)
        #expect(machine.onlySessionResetOwed)
        #expect(machine.planStatement(carryingReset: true, carried: nil, singleRow: false).reset != nil)
        #expect(!machine.onlySessionResetOwed)
    }

    /// A shared batch ends each statement in a sync of its own: its reset always goes apart.
    @Test func aBatchCarriesItsResetApart() {
        var machine = owing()
        #expect(machine.planBatchReset(carryingReset: false) == nil)
        #expect(machine.planBatchReset(carryingReset: true) == .syncedApart(PostgresSessionReset.carried))
        #expect(machine.planBatchReset(carryingReset: true) == nil)
    }
}
