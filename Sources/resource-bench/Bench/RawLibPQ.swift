import CLibPQ
import Foundation
import Glibc

/// A plain blocking libpq connection: the reference a user would get from libpq alone.
///
/// `@unchecked Sendable`: the `PGconn` is used by one thread at a time (the benchmark hands the object to a
/// thread and waits for that thread before using it again); `PQcancel` with a `PGcancel` object from
/// another thread is explicitly thread-safe in libpq.
final class RawLibPQConnection: @unchecked Sendable {
    struct Failure: Error, CustomStringConvertible { let description: String }

    let conn: OpaquePointer

    init(_ conninfo: String) throws {
        guard let conn = PQconnectdb(conninfo), PQstatus(conn) == CONNECTION_OK else {
            throw Failure(description: "raw libpq connect failed")
        }
        self.conn = conn
    }

    deinit { PQfinish(conn) }

    var backendPID: Int32 { PQbackendPID(conn) }

    /// `PQexec`; true when the result is OK (rows or command).
    @discardableResult
    func exec(_ sql: String) -> Bool {
        let result = PQexec(conn, sql)
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        return status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK
    }

    /// `PQexecParams` with one text parameter.
    @discardableResult
    func exec(_ sql: String, _ parameter: String) -> Bool {
        parameter.withCString { value in
            var values: [UnsafePointer<CChar>?] = [value]
            let result = PQexecParams(conn, sql, 1, nil, &values, nil, nil, 0)
            defer { PQclear(result) }
            return PQresultStatus(result) == PGRES_TUPLES_OK
        }
    }

    /// A cancel request (`PQgetCancel` + `PQcancel`), blocking until the server answered it.
    func cancel() {
        guard let cancel = PQgetCancel(conn) else { return }
        var buffer = [CChar](repeating: 0, count: 256)
        _ = PQcancel(cancel, &buffer, 256)
        PQfreeCancel(cancel)
    }

    /// Runs `work` on a new thread and returns its result without blocking the cooperative pool.
    static func onThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: work()) }.start()
        }
    }
}
