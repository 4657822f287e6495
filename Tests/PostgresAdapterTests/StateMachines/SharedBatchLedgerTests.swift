import Testing

@testable import PostgresAdapter

/// What a shared batch's statements are reported as, from the server's word alone (tags and the final status):
/// a pure value, no server.
@Suite struct SharedBatchLedgerTests {
    typealias Ledger = SharedBatchLedger

    static func done(_ tag: String) -> Ledger.Outcome {
        .success(PostgresResult(rows: [], commandTag: tag, affectedRows: nil))
    }

    /// Without a block, every outcome is handed out as it arrives, and the batch's end adds nothing.
    @Test func withoutABlockEachOutcomeGoesOutAtOnce() {
        var ledger = Ledger()
        #expect(ledger.ended(0, Self.done("INSERT 0 1")).count == 1)
        #expect(ledger.ended(1, Self.done("SELECT 1")).count == 1)
        guard case .report(rollBack: false, let rest) = ledger.batchEnded(sessionIdle: true), rest.isEmpty else {
            Issue.record("nothing held, nothing to roll back")
            return
        }
    }

    /// A statement the server reports as `BEGIN` (however it was spelled) and everything after it in the batch
    /// are held, then all fail, the block rolled back first; what came before stays reported.
    @Test func fromTheOpenerOnNothingIsReportedAsDone() {
        var ledger = Ledger()
        #expect(ledger.ended(0, Self.done("INSERT 0 1")).count == 1, "before the block: committed at its sync")
        #expect(ledger.ended(1, Self.done("BEGIN")).isEmpty)
        #expect(ledger.ended(2, Self.done("INSERT 0 1")).isEmpty, "inside the block: not committed")
        var failed = PostgresError(.server, "current transaction is aborted")
        failed.sqlState = "25P02"
        #expect(ledger.ended(3, .failure(failed)).isEmpty)
        guard case .report(rollBack: true, let held) = ledger.batchEnded(sessionIdle: false) else {
            Issue.record("the open block is rolled back")
            return
        }
        #expect(held.map(\.0) == [1, 2, 3])
        for (index, outcome) in held {
            guard case .failure(let error) = outcome else {
                Issue.record("statement \(index) must not be reported as done")
                continue
            }
            if index == 3 {
                #expect(error.sqlState == "25P02", "a server error inside the block stays the server's")
            } else {
                #expect(error.code == .sharedTransactionBlock)
                #expect(error.message.contains("rolled the block back"))
            }
        }
    }

    /// `START TRANSACTION` opens a block too; a block a later statement ended is described as such.
    @Test func aBlockEndedInsideTheBatchSaysSo() {
        var ledger = Ledger()
        _ = ledger.ended(0, Self.done("START TRANSACTION"))
        _ = ledger.ended(1, Self.done("COMMIT"))
        guard case .report(rollBack: false, let held) = ledger.batchEnded(sessionIdle: true) else {
            Issue.record("the session is idle: nothing to roll back")
            return
        }
        #expect(held.count == 2)
        #expect(
            held.allSatisfy { if case .failure(let e) = $0.1 { e.message.contains("ended the block") } else { false } })
    }

    /// A block the server reports open although no tag opened one: the session's state is unknown.
    @Test func aBlockNoTagExplainsBreaksTheConnection() {
        var ledger = Ledger()
        _ = ledger.ended(0, Self.done("SELECT 1"))
        guard case .unexplained = ledger.batchEnded(sessionIdle: false) else {
            Issue.record("expected the connection to be broken")
            return
        }
    }
}
