import CLibPQ
import ResourceKit

/// A statement run under a deadline carries it to the server as its own `statement_timeout`, in the same round
/// trip (``PostgresSessionOptions/carriesDeadlineToServer``), so that a client that froze or died cannot hold the
/// server past the deadline: no cancel request is needed for the server to stop.
///
/// On the wire it is a pipeline of three statements and one sync: the prelude saves the session's
/// `statement_timeout` and sets the carried one, unless the session's own is shorter (both as `set_config(...,
/// true)`: local to the transaction); then the caller's statement; then the epilogue restores the saved value
/// unless the statement set its own (it matters inside an explicit transaction; otherwise the sync ends the
/// implicit transaction and the local setting with it). Only the caller's statement's results reach the caller;
/// ``ConnectionStateMachine/CarriedDeadline``, the payload of the wire mode, walks the others.
extension PostgresConnection {
    /// Saves the session's timeout, sets `$1` milliseconds unless the session's own is shorter, and records what it
    /// set (the inner `set_config` returns it); says whether the carried one is in force.
    ///
    /// The session's timeout in milliseconds is read from `current_setting`, whose text (`0`, `500ms`, `30s`,
    /// `1min`, `2h`, `1d`: a time setting is shown in its largest exact unit) is valid interval input. Not the
    /// `pg_settings` view: it builds every setting's row on each call, which made the prelude several times the
    /// cost of the statement it carried (Docs/Guides/Adapters.md, "What a deadline does on each Postgres path").
    /// `OFFSET 0` keeps the planner from folding the subquery into the outer query: folded, its `current_setting`
    /// would be read again after the outer `set_config` changed it, and the carried timeout would look not in
    /// force (`CarriedDeadlineTests.aPooledStatementCarryingItsResetAndDeadlineEndsInDeadlineExceeded`).
    static let carryPrelude = """
        SELECT set_config('resourcekit.statement_timeout', s.setting, true), \
        set_config('resourcekit.carried_timeout', set_config('statement_timeout', \
        CASE WHEN s.ms = 0 OR s.ms > $1::int8 THEN $1::int8::text ELSE s.setting END, true), true), \
        s.ms = 0 OR s.ms > $1::int8 \
        FROM (SELECT (extract(epoch FROM current_setting('statement_timeout')::interval) * 1000)::int8 AS ms, \
        current_setting('statement_timeout') AS setting OFFSET 0) AS s
        """
    /// Restores the timeout the prelude saved, unless the statement itself changed it (`SET LOCAL
    /// statement_timeout`): then the statement's own setting stays.
    static let carryEpilogue = """
        SELECT CASE WHEN current_setting('statement_timeout') = current_setting('resourcekit.carried_timeout') \
        THEN set_config('statement_timeout', current_setting('resourcekit.statement_timeout'), true) END
        """

    /// The deadline to carry for a statement sent now, if any: the operation's (``ResourceHandle/operationDeadline``)
    /// when the session carries deadlines.
    func deadlineToCarry() -> ContinuousClock.Instant? {
        guard session.carriesDeadlineToServer else { return nil }
        return handle?.operationDeadline
    }

    /// The carried timeout for `deadline`, in whole milliseconds (at least 1). Throws ``DeadlineExceededError``
    /// for a deadline already past: nothing is then sent.
    static func carriedMilliseconds(_ deadline: ContinuousClock.Instant) throws -> Int64 {
        let remaining = deadline - .now
        guard remaining > .zero else { throw DeadlineExceededError(deadline: deadline) }
        let (seconds, attoseconds) = remaining.components
        return max(1, seconds * 1_000 + attoseconds / 1_000_000_000_000_000)
    }

    /// Queues the carried statement's pipeline (under the lock, on a connection with nothing on the wire but,
    /// perhaps, a session reset queued in front of it in the same pipeline). A refused queue breaks the
    /// connection: queued items cannot be taken back.
    static func sendCarried(
        _ conn: LibPQConnection, _ sql: String, _ binds: [PostgresBind], milliseconds: Int64, _ state: inout State
    ) throws {
        guard conn.pipelineStatus() == PQ_PIPELINE_ON || conn.enterPipelineMode() == 1 else {
            throw PostgresError(.invalidQuery, conn.errorText)
        }
        func queue(_ sql: String, _ binds: [PostgresBind]) -> Bool {
            PostgresWireText.withParameters(binds) { types, values in
                conn.sendQueryParams(sql, Int32(binds.count), types, values, nil, nil, 0)
            } == 1
        }
        guard queue(carryPrelude, [milliseconds.postgresBind]), queue(sql, binds), queue(carryEpilogue, []),
            conn.pipelineSync() == 1
        else {
            let message = conn.errorText
            state.machine.lost()
            throw PostgresError(conn.status() == CONNECTION_BAD ? .connection : .invalidQuery, message)
        }
    }

    /// What a result of a carried statement's pipeline is for.
    enum CarriedStep {
        /// The prelude's or the epilogue's (or the end of one statement's results): taken here.
        case taken
        /// The caller's statement's: the caller takes it.
        case callers
        /// The sync: the pipeline is over, the connection is back in its plain mode.
        case ended
    }

    /// What ``pump(_:consume:)`` does with `result` (nil: the end of one queued statement's results) while a
    /// carried statement's pipeline is read. Under the lock.
    static func takeCarried(_ result: OpaquePointer?, _ conn: LibPQConnection, _ state: inout State) throws
        -> CarriedStep
    {
        guard case .carried(var carried) = state.machine.mode else { return .callers }
        switch carried.stage {
        case .prelude:
            if let result {
                if PQresultStatus(result) == PGRES_TUPLES_OK, PQntuples(result) == 1 {
                    carried.inForce = String(cString: PQgetvalue(result, 0, 2)) == "t"
                }
            } else {
                carried.stage = .statement
            }
            state.machine.carriedReadingMoved(carried)
            return .taken
        case .statement:
            guard result == nil else { return .callers }
            carried.stage = .epilogue
            state.machine.carriedReadingMoved(carried)
            return .taken
        case .epilogue:
            guard let result, PQresultStatus(result) == PGRES_PIPELINE_SYNC else { return .taken }
            guard conn.exitPipelineMode() == 1 else {
                state.machine.lost()
                throw PostgresError(.connection, "could not leave pipeline mode")
            }
            state.machine.carriedPipelineEnded()
            return .ended
        }
    }

    /// `failure` as the caller sees it: our own cancel's `57014` is the cancellation's reason; a `57014` while a
    /// carried timeout was in force, at or after its deadline, is ``DeadlineExceededError``; anything else stays.
    func outcome(of failure: PostgresError, ourCancel: Bool) -> any Error {
        guard failure.isQueryCanceled else { return failure }
        if ourCancel { return handle?.cancellationReason?.error ?? CancellationError() }
        if let carried = state.withLock({ $0.machine.lastCarried }), carried.inForce,
            ContinuousClock.now >= carried.deadline - .milliseconds(50)
        {
            return DeadlineExceededError(deadline: carried.deadline)
        }
        return failure
    }
}

extension ConnectionStateMachine {
    /// Where the results of a carried statement's pipeline are: the payload of ``WireMode/carried(_:)``.
    struct CarriedDeadline: Sendable, Equatable {
        enum Stage: Sendable, Equatable {
            /// The prelude's results, up to its end.
            case prelude
            /// The caller's statement's results.
            case statement
            /// The epilogue's results, then the sync.
            case epilogue
        }

        var stage: Stage = .prelude
        /// The deadline that was carried.
        var deadline: ContinuousClock.Instant { storedDeadline.instant }
        /// Kept in a fixed-layout form (`StoredInstant`), as the machine holds it.
        let storedDeadline: StoredInstant
        /// Whether the carried timeout is the one in force (the session's own was not shorter): a
        /// `statement_timeout` error is then the deadline's.
        var inForce = false

        init(deadline: ContinuousClock.Instant, inForce: Bool = false) {
            self.storedDeadline = StoredInstant(deadline)
            self.inForce = inForce
        }
    }
}
