/// A Postgres failure that is not our cancellation.
///
/// - ``Code/server``: the server reported an error; ``sqlState``, ``severity``, ``message``, ``detail``,
///   ``hint`` and ``position`` come from it. A `57014` (query_canceled) that *we* caused is never reported here:
///   it surfaces as `CancellationError` (or `DeadlineExceededError`). A `57014` from the server's own
///   `statement_timeout` is a failure and stays here.
/// - ``Code/connection``: could not connect, or the connection was lost or is broken.
/// - ``Code/connectionTimedOut``: could not connect because every host attempt ran out of `connect_timeout`.
/// - ``Code/invalidConfiguration``, ``Code/invalidQuery``, ``Code/decoding``, ``Code/connectionBusy``:
///   caller mistakes, reported before anything is sent where possible.
///
/// The password is never part of any description.
public struct PostgresError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    ///
    /// An opaque code: compare it with the static members (`error.code == .server`). New codes may be
    /// added in any release, so a `switch` over codes needs a `default`.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }

        /// The server reported an error (see the type's overview).
        public static let server = Code("server")
        /// Could not connect, or the connection was lost or is broken.
        public static let connection = Code("connection")
        /// Every host attempt ran out of its `connect_timeout` (a silent server, a listener that drops SYNs).
        public static let connectionTimedOut = Code("connectionTimedOut")
        /// The conninfo or an option is invalid; nothing was sent.
        public static let invalidConfiguration = Code("invalidConfiguration")
        /// The statement or its parameters are invalid for this call; nothing was sent where possible.
        public static let invalidQuery = Code("invalidQuery")
        /// A value could not be decoded as the requested type.
        public static let decoding = Code("decoding")
        /// Another operation is running on this connection.
        public static let connectionBusy = Code("connectionBusy")
        /// The pool was shut down.
        public static let poolClosed = Code("poolClosed")
        /// The operation needs a server session of its own (`LISTEN`), and this connection's could not be
        /// verified (a transaction-mode pooler in front).
        public static let sessionRequired = Code("sessionRequired")
        /// A pipeline statement the server skipped because an earlier one in the same batch failed.
        public static let pipelineAborted = Code("pipelineAborted")
        /// A shared statement (``PostgresPool/execute(_:_:sharing:)``) left the session in a transaction block
        /// (the server said so: its command tag was `BEGIN` or `START TRANSACTION`), or ran inside a block another
        /// shared statement of its batch opened. Nothing of it is reported as done; the message says what
        /// became of the block (rolled back by the pool before anyone else used the connection, or ended by a
        /// later statement of the batch).
        public static let sharedTransactionBlock = Code("sharedTransactionBlock")

        /// The code's name, as in `PostgresError.connectionRefused`.
        public var description: String { name }
    }

    public let code: Code
    /// The server's message, or ours.
    public let message: String
    /// SQLSTATE (server errors).
    public var sqlState: String?
    public var severity: String?
    public var detail: String?
    public var hint: String?
    /// 1-based character position in the query (server errors).
    public var position: Int?
    /// Where the server was (a PL/pgSQL line, or for COPY `COPY t, line 3, column a: "x"`).
    public var context: String?

    /// For an error in `COPY ... FROM STDIN`: the 1-based line of the input the server rejected.
    public var copyLine: Int? {
        guard let context, let range = context.range(of: ", line ") else { return nil }
        return Int(context[range.upperBound...].prefix { $0.isNumber })
    }

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// `true` for `57014` (query_canceled), e.g. from `statement_timeout`.
    public var isQueryCanceled: Bool { sqlState == "57014" }

    /// A `57014` the server reports as its `statement_timeout` (PostgreSQL's message, in English: a server whose
    /// `lc_messages` is another language is not recognised here, and such a timeout counts as a cancel).
    var isStatementTimeout: Bool { isQueryCanceled && message.contains("statement timeout") }

    public var description: String {
        var text = "PostgresError.\(code)"
        if let sqlState { text += " \(sqlState)" }
        if let severity { text += " \(severity)" }
        text += ": \(message)"
        if let detail { text += " (detail: \(detail))" }
        if let hint { text += " (hint: \(hint))" }
        if let context { text += " (context: \(context))" }
        return text
    }
}
