import Testing

@testable import PostgresAdapter

/// The connection's drivers report what they saw on the wire (a COPY began or ended, a sync arrived, a carried
/// statement's reading moved on) and the machine decides the mode: each event against every mode it may meet.
@Suite struct WireModeEventTests {
    typealias Mode = ConnectionStateMachine.WireMode

    static let carried = ConnectionStateMachine.CarriedDeadline(deadline: .now, inForce: true)

    /// Every mode a query can be read in.
    static let modes: [Mode] = [
        .simple, .copyOut, .copyIn, .copyInEnded, .pipeline, .carried(carried), .resetPrefix(then: .statement),
        .resetPrefix(then: .carried(carried)), .pipelinedStatement, .resetPrefix(then: .grouped(resetStatements: 1)),
        .resetPrefix(then: .grouped(resetStatements: 2)),
    ]

    /// A machine with a query on the wire read as `mode`.
    static func onWire(_ mode: Mode) -> ConnectionStateMachine {
        var machine = ConnectionStateMachine()
        #expect(machine.begin(carryingReset: true) == .ready)
        _ = machine.sent(mode: mode)
        #expect(machine.mode == mode)
        return machine
    }

    @Test(arguments: modes) func aCopyBeginsInTheDirectionTheServerSaid(from mode: Mode) {
        var out = Self.onWire(mode)
        out.copyOutBegan()
        #expect(out.mode == .copyOut)
        var into = Self.onWire(mode)
        into.copyInBegan()
        #expect(into.mode == .copyIn)
    }

    @Test(arguments: modes) func onlyACopyInProgressQueuesItsEnd(from mode: Mode) {
        var machine = Self.onWire(mode)
        machine.copyEndQueued()
        #expect(machine.mode == (mode == .copyIn ? .copyInEnded : mode))
    }

    @Test(arguments: modes) func onlyACopyEnds(from mode: Mode) {
        var machine = Self.onWire(mode)
        machine.copyEnded()
        let copying = [Mode.copyOut, .copyIn, .copyInEnded].contains(mode)
        #expect(machine.mode == (copying ? .simple : mode))
    }

    @Test(arguments: modes) func onlyACarriedStatementsReadingMoves(from mode: Mode) {
        var machine = Self.onWire(mode)
        var moved = Self.carried
        moved.stage = .epilogue
        machine.carriedReadingMoved(moved)
        if case .carried = mode {
            #expect(machine.mode == .carried(moved))
        } else {
            #expect(machine.mode == mode)
        }
    }

    @Test func aCarriedResetsSyncHandsOverToTheWorkBehindItInThePipeline() {
        var statement = Self.onWire(.resetPrefix(then: .statement))
        #expect(statement.pipelineSynced() == false)
        #expect(statement.mode == .pipelinedStatement)
        var carried = Self.onWire(.resetPrefix(then: .carried(Self.carried)))
        #expect(carried.pipelineSynced() == false)
        #expect(carried.mode == .carried(Self.carried))
    }

    @Test(arguments: modes) func onlyAGroupedResetCountsItsStatementsEnding(from mode: Mode) {
        var machine = Self.onWire(mode)
        machine.resetStatementEnded()
        switch mode {
        case .resetPrefix(.grouped(1)): #expect(machine.mode == .pipelinedStatement)
        case .resetPrefix(.grouped(2)): #expect(machine.mode == .resetPrefix(then: .grouped(resetStatements: 1)))
        default: #expect(machine.mode == mode)
        }
    }

    @Test(arguments: [
        Mode.pipeline, .pipelinedStatement, .carried(carried), .resetPrefix(then: .grouped(resetStatements: 1)),
    ])
    func anyOtherSyncEndsThePipeline(from mode: Mode) {
        var machine = Self.onWire(mode)
        #expect(machine.pipelineSynced() == true)
        #expect(machine.mode == .simple)
    }

    @Test func noEventMovesAConnectionWithNothingOnTheWire() {
        var machine = ConnectionStateMachine()
        machine.copyOutBegan()
        machine.copyEndQueued()
        machine.copyEnded()
        _ = machine.pipelineSynced()
        #expect(machine.queryOnWire == nil)
        #expect(machine.begin() == .ready)
    }
}
