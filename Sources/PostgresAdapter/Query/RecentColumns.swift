import CLibPQ
import Glibc
import Synchronization

/// The columns of a connection's latest result, handed on to the next result whose columns have the same names and
/// types. A service runs the same few statements again and again, and building a result's columns anew cost two
/// arrays on every query, plus a string for every column name too long to be stored inline (over 15 bytes);
/// comparing costs a `strcmp` and a type check per column. The rows of both results then share one copy of the
/// columns, as the rows of one result always did. A connection runs one statement at a time, so the lock is never
/// contended.
struct RecentColumns: ~Copyable, Sendable {
    private let latest = Mutex<PostgresColumns?>(nil)

    init() {}

    /// `result`'s columns: the latest ones if they describe it, else new ones (which become the latest).
    func columns(of result: OpaquePointer) -> PostgresColumns {
        if let previous = latest.withLock({ $0 }), previous.describes(result) { return previous }
        let made = PostgresRow.columns(of: result)
        latest.withLock { $0 = made }
        return made
    }
}

extension PostgresColumns {
    /// Whether `result`'s columns have exactly these names and types, in this order.
    func describes(_ result: OpaquePointer) -> Bool {
        let count = Int(PQnfields(result))
        guard count == names.count else { return false }
        for field in 0..<count {
            guard oids[field] == UInt32(PQftype(result, Int32(field))),
                let name = PQfname(result, Int32(field)),
                names[field].withCString({ strcmp($0, name) == 0 })
            else { return false }
        }
        return true
    }
}
