import CLibPQ

/// Column names and types of a result, shared by its rows.
public struct PostgresColumns: Sendable, Hashable {
    public let names: [String]
    public let oids: [UInt32]

    func index(of name: String) -> Int? { names.firstIndex(of: name) }
}

/// One result row, decoded from Postgres's text format.
public struct PostgresRow: Sendable, Hashable {
    public let columns: PostgresColumns
    /// Raw text values; `nil` is SQL NULL.
    public let values: [String?]

    /// The raw text of column `index`.
    public subscript(index: Int) -> String? { values[index] }

    /// Decodes column `index`.
    /// - Throws: ``PostgresError/Code/decoding`` for an out-of-range index, NULL into a non-optional, or bad text.
    public func decode<T: PostgresDecodable>(_ type: T.Type = T.self, at index: Int) throws -> T {
        guard values.indices.contains(index) else {
            throw PostgresError(.decoding, "column index \(index) is out of range (\(values.count) columns)")
        }
        return try T.decode(text: values[index], oid: columns.oids[index])
    }

    /// Decodes the column called `name`.
    public func decode<T: PostgresDecodable>(_ type: T.Type = T.self, named name: String) throws -> T {
        guard let index = columns.index(of: name) else {
            throw PostgresError(.decoding, "no column named \(name)")
        }
        return try decode(type, at: index)
    }

    static func columns(of result: OpaquePointer) -> PostgresColumns {
        let count = Int(PQnfields(result))
        var names: [String] = []
        var oids: [UInt32] = []
        names.reserveCapacity(count)
        oids.reserveCapacity(count)
        for field in 0..<count {
            names.append(PQfname(result, Int32(field)).map { String(cString: $0) } ?? "")
            oids.append(UInt32(PQftype(result, Int32(field))))
        }
        return PostgresColumns(names: names, oids: oids)
    }

    static func row(_ index: Int32, of result: OpaquePointer, columns: PostgresColumns) -> PostgresRow {
        var values: [String?] = []
        values.reserveCapacity(columns.names.count)
        for field in 0..<Int32(columns.names.count) {
            if PQgetisnull(result, index, field) == 1 {
                values.append(nil)
            } else {
                let length = Int(PQgetlength(result, index, field))
                let pointer = UnsafeRawPointer(PQgetvalue(result, index, field)!)
                // Invalid UTF-8 from the server is replaced (U+FFFD), never a crash.
                values.append(String(decoding: UnsafeRawBufferPointer(start: pointer, count: length), as: UTF8.self))
            }
        }
        return PostgresRow(columns: columns, values: values)
    }
}

/// The result of one statement.
public struct PostgresResult: Sendable {
    /// The rows (empty for commands).
    public let rows: [PostgresRow]
    /// The command tag, such as `INSERT 0 3`.
    public let commandTag: String
    /// Rows affected by INSERT/UPDATE/DELETE/SELECT, when the server reports it.
    public let affectedRows: Int?

    /// `result` decoded; its columns are `recent`'s when they describe it (see ``RecentColumns``).
    static func from(_ result: OpaquePointer, reusing recent: borrowing RecentColumns) -> PostgresResult {
        let columns = recent.columns(of: result)
        let count = PQntuples(result)
        var rows: [PostgresRow] = []
        rows.reserveCapacity(Int(count))
        for index in 0..<count { rows.append(PostgresRow.row(index, of: result, columns: columns)) }
        let tag = PQcmdStatus(result).map { String(cString: $0) } ?? ""
        let affected = PQcmdTuples(result).flatMap { Int(String(cString: $0)) }
        return PostgresResult(rows: rows, commandTag: tag, affectedRows: affected)
    }
}

extension PostgresError {
    /// The server error carried by `result`.
    static func server(_ result: OpaquePointer) -> PostgresError {
        func field(_ code: Character) -> String? {
            PQresultErrorField(result, Int32(code.asciiValue!)).map { String(cString: $0) }
        }
        var error = PostgresError(.server, field("M") ?? "server error")
        error.sqlState = field("C")
        error.severity = field("V") ?? field("S")
        error.detail = field("D")
        error.hint = field("H")
        error.position = field("P").flatMap { Int($0) }
        error.context = field("W")
        return error
    }
}
