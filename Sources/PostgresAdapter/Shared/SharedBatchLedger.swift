/// What each statement of a shared batch is reported as, decided from what the server said: each statement's
/// command tag, and the transaction status of the batch's last ReadyForQuery (Docs/Architecture.md, "Shared
/// statements"). Tested without I/O (`SharedBatchLedgerTests`).
///
/// A shared statement runs in its own implicit transaction, committed at its sync. Only a statement whose tag is
/// `BEGIN` or `START TRANSACTION` leaves the session in a transaction block, and then every later statement of
/// the batch runs inside it (or inside a block chained from it) until the batch's end, where the server's status
/// says whether a block is still open. So from such a statement on, no outcome is handed out as it arrives: each
/// is held until the batch's end, and then none of them is reported as done. (libpq reports the transaction
/// status only once a pipeline is idle, so the tag is the server's per-statement word; the final status is the
/// check, and a status that disagrees with the tags breaks the connection.)
struct SharedBatchLedger {
    typealias Outcome = Result<PostgresResult, PostgresError>

    /// The statement whose tag opened a transaction block, if one did.
    private(set) var blockOpenedAt: Int?
    private var held: [(index: Int, outcome: Outcome)] = []

    /// Whether a command tag says that the statement opened a transaction block.
    static func opensBlock(_ commandTag: String) -> Bool {
        commandTag == "BEGIN" || commandTag == "START TRANSACTION"
    }

    /// Statement `index` reached its sync with `outcome`: returns what to hand out now (nothing once a block was
    /// opened in this batch).
    mutating func ended(_ index: Int, _ outcome: Outcome) -> [(Int, Outcome)] {
        if blockOpenedAt == nil, case .success(let result) = outcome, Self.opensBlock(result.commandTag) {
            blockOpenedAt = index
        }
        guard blockOpenedAt != nil else { return [(index, outcome)] }
        held.append((index, outcome))
        return []
    }

    /// What the batch's end does.
    enum End {
        /// Hand these out (after rolling the session back when `rollBack`).
        case report(rollBack: Bool, [(Int, Outcome)])
        /// The server says a block is open though no statement's tag opened one: the session's state is not
        /// known; break the connection (closing it rolls the block back).
        case unexplained
    }

    /// The batch's last sync arrived; `sessionIdle`: its ReadyForQuery said no transaction block is open.
    mutating func batchEnded(sessionIdle: Bool) -> End {
        guard let opener = blockOpenedAt else {
            return sessionIdle ? .report(rollBack: false, []) : .unexplained
        }
        let fate =
            sessionIdle
            ? "a later statement of the same batch ended the block (COMMIT or ROLLBACK), so what ran inside it may "
                + "have been committed"
            : "the pool rolled the block back before anyone else used the connection"
        let outcomes = held.map { index, outcome -> (Int, Outcome) in
            if index == opener { return (index, .failure(Self.error(Self.opened + fate))) }
            if case .failure = outcome { return (index, outcome) }  // the server's own error: nothing was done
            return (index, .failure(Self.error(Self.ranInside + fate)))
        }
        held = []
        return .report(rollBack: !sessionIdle, outcomes)
    }

    private static let opened = "this statement opened a transaction block, which a shared statement may not; "
    private static let ranInside =
        "this statement ran after another shared statement of its batch opened a transaction block; "

    private static func error(_ message: String) -> PostgresError {
        PostgresError(.sharedTransactionBlock, message + " (run transactions in withConnection)")
    }
}
