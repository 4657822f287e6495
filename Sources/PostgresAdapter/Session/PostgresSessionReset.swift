import CLibPQ

/// What a pooled connection's session is reset to between users (Docs/Architecture.md, "Clean sessions"):
/// `DISCARD ALL`. A session after it is a fresh connection's: settings back to the values the connection started
/// with (its conninfo's `options` included), no prepared statements, cursors, `LISTEN`s, temporary tables,
/// session advisory locks, cached plans or sequence state, the session's own user again. The settings the
/// connection itself asked for (``PostgresSessionOptions``) are applied again after it.
///
/// Carried in front of a statement it is `DISCARD ALL` itself, the first statement after a sync (where the server
/// accepts it in a pipeline), under the statement's own sync when there is nothing to restore after it. On a
/// round trip of its own it is one simple-protocol string, where `DISCARD ALL` would be refused (a
/// multi-statement string is one transaction block), so it is spelled out as the statements PostgreSQL documents
/// it to stand for.
enum PostgresSessionReset {
    /// The carried form, before the connection's own settings.
    static let carried = ["DISCARD ALL"]

    /// `DISCARD ALL` spelled out, for the simple-protocol string.
    static let statements = [
        "CLOSE ALL", "SET SESSION AUTHORIZATION DEFAULT", "RESET ALL", "DEALLOCATE ALL", "UNLISTEN *",
        "SELECT pg_advisory_unlock_all()", "DISCARD PLANS", "DISCARD SEQUENCES", "DISCARD TEMP",
    ]

    /// The reset as one simple-protocol string, followed by `restoring` (the connection's own settings).
    static func sql(restoring: [String]) -> String {
        (statements + restoring).joined(separator: "; ")
    }
}

extension ConnectionStateMachine {
    /// How the next statement goes on the wire, as the machine decides it from what the connection owes
    /// (Docs/Architecture.md, "Clean sessions"): the driver queues what the plan says and reports it with
    /// ``sent(_:)``; it never names a mode itself.
    struct StatementPlan: Sendable, Equatable {
        /// The owed session reset queued in front of the statement; `nil`: none.
        let reset: ResetInFront?
        /// The deadline the statement carries to the server as its `statement_timeout`; `nil`: none.
        let carried: CarriedDeadline?
        /// The mode the statement is read in once it is on the wire.
        let mode: WireMode
    }

    /// A session reset in front of a statement: the statements to queue, and where their sync is.
    enum ResetInFront: Sendable, Equatable {
        /// `DISCARD ALL` alone, under the statement's own sync: one write, one answer. `DISCARD ALL`, the first
        /// statement after a sync, commits at once, so the statement behind it still leads a transaction of its own.
        case underTheStatementsSync([String])
        /// The reset and the settings the connection restores after it, then a sync of their own, then the
        /// statement: a `SET` behind the reset would share the statement's transaction (and be taken back by its
        /// failure), and a carried deadline's prelude must not run inside the reset's transaction either.
        case syncedApart([String])

        var statements: [String] {
            switch self {
            case .underTheStatementsSync(let statements), .syncedApart(let statements): statements
            }
        }
    }

    /// The plan for the statement an operation sends now; takes the owed session reset when the operation carries it
    /// (`carryingReset`) and the statement can carry it (a single-row statement cannot: its rows stream outside a
    /// pipeline). `carried`: the deadline the statement carries to the server, if any.
    mutating func planStatement(carryingReset: Bool, carried: CarriedDeadline?, singleRow: Bool) -> StatementPlan {
        guard carryingReset, !singleRow, takeSessionReset() else {
            return StatementPlan(reset: nil, carried: carried, mode: carried.map { .carried($0) } ?? .simple)
        }
        if carried == nil, sessionRestore.isEmpty {
            let statements = PostgresSessionReset.carried
            return StatementPlan(
                reset: .underTheStatementsSync(statements), carried: nil,
                mode: .resetPrefix(then: .grouped(resetStatements: statements.count)))
        }
        return StatementPlan(
            reset: .syncedApart(PostgresSessionReset.carried + sessionRestore), carried: carried,
            mode: .resetPrefix(then: carried.map { .carried($0) } ?? .statement))
    }

    /// The reset a shared batch carries in front of its statements (`carryingReset`), if one is owed: always synced
    /// apart, since each statement of the batch ends in a sync of its own.
    mutating func planBatchReset(carryingReset: Bool) -> ResetInFront? {
        guard carryingReset, takeSessionReset() else { return nil }
        return .syncedApart(PostgresSessionReset.carried + sessionRestore)
    }

    /// The statement planned by ``planStatement(carryingReset:carried:singleRow:)`` was handed to libpq. Returns its
    /// id.
    mutating func sent(_ plan: StatementPlan) -> QueryID {
        sent(mode: plan.mode)
    }
}

extension PostgresConnection {
    /// Hands the pool's session reset to libpq as one simple-protocol string, on a round trip of its own (under
    /// the lock, by the cleanup that owes it). `false` when libpq refused it: the connection is then broken.
    static func sendSessionReset(_ state: inout State) -> Bool {
        guard let conn = state.conn else { return false }
        guard conn.sendQuery(PostgresSessionReset.sql(restoring: state.machine.sessionRestore)) == 1 else {
            state.machine.lost()
            return false
        }
        _ = state.machine.sessionResetSent()
        return true
    }

    /// Enters pipeline mode and queues the session reset's `statements` (``ConnectionStateMachine/ResetInFront``)
    /// and a sync of their own, in front of the work the caller queues next (under the lock; the sync keeps the work
    /// out of the reset's implicit transaction). A refused queue breaks the connection.
    static func queueSessionReset(_ conn: LibPQConnection, _ statements: [String], _ state: inout State) throws {
        try queueResetStatements(conn, statements, &state)
        guard conn.pipelineSync() == 1 else {
            state.machine.lost()
            throw PostgresError(.connection, conn.errorText)
        }
    }

    /// Enters pipeline mode and queues `statements` with no sync (under the lock). A refused queue breaks the
    /// connection.
    private static func queueResetStatements(
        _ conn: LibPQConnection, _ statements: [String], _ state: inout State
    ) throws {
        guard conn.enterPipelineMode() == 1 else {
            state.machine.lost()
            throw PostgresError(.connection, conn.errorText)
        }
        for statement in statements {
            guard conn.sendQueryParams(statement, 0, nil, nil, nil, nil, 0) == 1 else {
                state.machine.lost()
                throw PostgresError(.connection, conn.errorText)
            }
        }
    }

    /// Enters pipeline mode and queues the session reset's `statements`, then `sql`, under one sync: one write,
    /// one answer (under the lock). `DISCARD ALL`, the first statement after a sync, commits at once, so the
    /// statement behind it starts a transaction of its own: its failure cannot take the reset back, and a statement
    /// that must lead its transaction (`VACUUM`, `BEGIN ISOLATION LEVEL ...`) runs there as it would alone. The
    /// machine plans it only for a connection that restores no settings of its own after the reset
    /// (``ConnectionStateMachine/planStatement(carryingReset:carried:singleRow:)``). A refused queue breaks the
    /// connection.
    static func queueGroupedReset(
        _ conn: LibPQConnection, _ statements: [String], _ sql: String, _ binds: [PostgresBind],
        _ state: inout State
    ) throws {
        try queueResetStatements(conn, statements, &state)
        try queueInPipeline(conn, sql, binds, &state)
    }

    /// Queues one statement and its sync in the pipeline a carried reset opened (under the lock). A refused queue
    /// breaks the connection: the reset in front of it cannot be taken back.
    static func queueInPipeline(
        _ conn: LibPQConnection, _ sql: String, _ binds: [PostgresBind], _ state: inout State
    ) throws {
        let queued = sql.withCString { text in
            PostgresWireText.withParameters(binds) { types, values in
                conn.sendQueryParams(text, Int32(binds.count), types, values, nil, nil, 0)
            }
        }
        guard queued == 1, conn.pipelineSync() == 1 else {
            let message = conn.errorText
            state.machine.lost()
            throw PostgresError(conn.status() == CONNECTION_BAD ? .connection : .invalidQuery, message)
        }
    }

    /// What ``pump(_:consume:)`` does with `result` (nil: the end of one queued statement's results) while a
    /// carried reset, or the statement behind it, is read; the drain of an abandoned one reads them here too, and
    /// drops what is the caller's. Under the lock.
    static func takePipelined(_ result: OpaquePointer?, _ conn: LibPQConnection, _ state: inout State) throws
        -> CarriedStep
    {
        switch state.machine.mode {
        case .resetPrefix(let then):
            guard let result else {
                state.machine.resetStatementEnded()
                return .taken
            }
            let status = PQresultStatus(result)
            switch status {
            case PGRES_PIPELINE_SYNC:
                // To the work behind the reset; or, under one sync with it, the end of both.
                if then.isSyncedApart {
                    _ = state.machine.pipelineSynced()
                    return .taken
                }
                try Self.leavePipeline(conn, &state)
                return .ended
            case PGRES_COMMAND_OK, PGRES_TUPLES_OK:
                return .taken
            default:
                // Failed or skipped (a cancel of the statement behind it that landed early): owed again, so the
                // next operation's cleanup runs it. Behind its own sync the statement is read as the server
                // answers it; under the same sync the statement did not run, and its caller gets this error.
                state.machine.requireSessionReset()
                return then.isSyncedApart || status != PGRES_FATAL_ERROR ? .taken : .callers
            }
        case .pipelinedStatement:
            guard let result else { return .taken }
            switch PQresultStatus(result) {
            case PGRES_PIPELINE_SYNC:
                try Self.leavePipeline(conn, &state)
                return .ended
            case PGRES_PIPELINE_ABORTED: return .taken  // skipped behind a failed reset: its caller has that error
            default: return .callers
            }
        default:
            return .callers
        }
    }

    /// The pipeline's sync arrived: the connection leaves libpq's pipeline mode (under the lock).
    private static func leavePipeline(_ conn: LibPQConnection, _ state: inout State) throws {
        if state.machine.pipelineSynced(), conn.exitPipelineMode() != 1 {
            state.machine.lost()
            throw PostgresError(.connection, "could not leave pipeline mode")
        }
    }
}
