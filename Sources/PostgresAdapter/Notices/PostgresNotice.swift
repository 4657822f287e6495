import CLibPQ
import ResourceKit

/// A notice or warning the server sent (`RAISE NOTICE`, `RAISE WARNING`, a deprecation warning), or a message
/// libpq reports about the connection.
///
/// ResourceKit installs its own notice receiver on every connection, so libpq never prints to the host's
/// stderr. Notices reach the handler given to the `onNotice` handler of `PostgresConnection.connect`
/// (or ``PostgresPool``); without one, each notice becomes a registry event named
/// `postgres.notice.<severity>` and its text is dropped (it may hold user data).
public struct PostgresNotice: Sendable, Hashable, CustomStringConvertible {
    /// `WARNING`, `NOTICE`, `INFO`, `LOG`, `DEBUG`; `FATAL` for a termination message that arrives while idle.
    public let severity: String
    /// SQLSTATE.
    public let sqlState: String?
    /// The primary message. May hold user data: it is never logged by ResourceKit.
    public let message: String
    public let detail: String?
    public let hint: String?

    public init(severity: String, sqlState: String?, message: String, detail: String? = nil, hint: String? = nil) {
        self.severity = severity
        self.sqlState = sqlState
        self.message = message
        self.detail = detail
        self.hint = hint
    }

    /// Severity and SQLSTATE only (the message may hold user data).
    public var description: String { "PostgresNotice(\(severity) \(sqlState ?? "-----"))" }

    init(result: OpaquePointer) {
        func field(_ code: Int32) -> String? {
            PQresultErrorField(result, code).map { String(cString: $0) }
        }
        severity = field(Int32(UInt8(ascii: "V"))) ?? field(Int32(UInt8(ascii: "S"))) ?? "NOTICE"
        sqlState = field(Int32(UInt8(ascii: "C")))
        let primary = field(Int32(UInt8(ascii: "M")))
        message = primary ?? String(cString: PQresultErrorMessage(result)).trimmingSpaces
        detail = field(Int32(UInt8(ascii: "D")))
        hint = field(Int32(UInt8(ascii: "H")))
    }
}

/// Where a connection's notices go: libpq's receiver appends under a lock (libpq calls it from inside the
/// connection's own calls, under the connection's lock), and the connection hands them to the user's handler
/// after releasing its lock.
final class NoticeSink: Sendable {
    private let pending = Locked<[PostgresNotice]>([])
    private let handler: (@Sendable (PostgresNotice) -> Void)?

    init(handler: (@Sendable (PostgresNotice) -> Void)?) {
        self.handler = handler
    }

    func receive(_ notice: PostgresNotice) {
        pending.withLock { $0.append(notice) }
    }

    /// Delivers what arrived; call it with no lock held. `handle` is read only when there is something to
    /// deliver (this runs once per result on the hot path).
    func deliver(reportingTo handle: @autoclosure () -> ResourceHandle?) {
        let notices = pending.withLock { pending -> [PostgresNotice] in
            if pending.isEmpty { return [] }
            defer { pending = [] }
            return pending
        }
        if notices.isEmpty { return }
        let handle = handle()
        for notice in notices {
            if let handler {
                handler(notice)
            } else {
                handle?.report("postgres.notice.\(notice.severity)")
            }
        }
    }

    /// Installs the receiver on `conn`. The sink must outlive `conn` (the connection keeps it until after
    /// `PQfinish`).
    func install(on conn: LibPQConnection) {
        let receiver: PQnoticeReceiver = { argument, result in
            guard let argument, let result else { return }
            Unmanaged<NoticeSink>.fromOpaque(argument).takeUnretainedValue().receive(PostgresNotice(result: result))
        }
        conn.setNoticeReceiver(receiver, Unmanaged.passUnretained(self).toOpaque())
    }
}

extension String {
    var trimmingSpaces: String {
        var text = Substring(self)
        while let last = text.last, last.isWhitespace { text.removeLast() }
        while let first = text.first, first.isWhitespace { text.removeFirst() }
        return String(text)
    }
}
