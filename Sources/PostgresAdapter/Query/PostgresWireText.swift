import CLibPQ

/// Statement text and parameters as libpq takes them: NUL-terminated C strings. A NUL byte inside a Swift string
/// would silently cut the C string there (libpq would run a prefix of the statement, or bind a prefix of the
/// value), so text holding one is refused before anything is sent. PostgreSQL's text types cannot hold a NUL
/// byte either.
enum PostgresWireText {
    /// Refuses statement text or parameter values that hold a NUL byte.
    ///
    /// - Throws: ``PostgresError`` `invalidQuery`, naming which part (never its content).
    static func check(_ sql: String, _ binds: [PostgresBind]) throws {
        if sql.utf8.contains(0) {
            throw PostgresError(.invalidQuery, "the statement's text contains a NUL byte")
        }
        for (index, bind) in binds.enumerated() where bind.text?.utf8.contains(0) == true {
            throw PostgresError(
                .invalidQuery, "parameter $\(index + 1) contains a NUL byte, which PostgreSQL text cannot hold")
        }
    }

    /// Lays `binds` out as libpq's parameter arrays (type OIDs; NUL-terminated values, a null pointer for SQL
    /// NULL) in temporary memory that lives for the call to `body` only: one allocation for all the bytes, on the
    /// stack when small, and none per value. The caller has checked the values (``check(_:_:)``).
    static func withParameters<Result>(
        _ binds: [PostgresBind],
        _ body: (_ types: UnsafePointer<Oid>?, _ values: UnsafePointer<UnsafePointer<CChar>?>?) throws -> Result
    ) rethrows -> Result {
        if binds.isEmpty { return try body(nil, nil) }
        var byteCount = 0
        for bind in binds {
            if let text = bind.text { byteCount += text.utf8.count + 1 }
        }
        return try withUnsafeTemporaryAllocation(of: Oid.self, capacity: binds.count) { types in
            try withUnsafeTemporaryAllocation(of: UnsafePointer<CChar>?.self, capacity: binds.count) { values in
                try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: max(byteCount, 1)) { bytes in
                    var offset = 0
                    for (index, bind) in binds.enumerated() {
                        types.initializeElement(at: index, to: Oid(bind.oid))
                        guard let text = bind.text else {
                            values.initializeElement(at: index, to: nil)
                            continue
                        }
                        let start = bytes.baseAddress! + offset
                        let copied = UnsafeMutableBufferPointer(start: start, count: byteCount - offset)
                            .initialize(fromContentsOf: text.utf8)
                        start[copied] = 0
                        values.initializeElement(
                            at: index, to: UnsafeRawPointer(start).assumingMemoryBound(to: CChar.self))
                        offset += copied + 1
                    }
                    return try body(UnsafePointer(types.baseAddress), UnsafePointer(values.baseAddress))
                }
            }
        }
    }
}
