/// Which statements may share a connection with other tasks' statements (``PostgresPool/execute(_:_:)``): one
/// that ends with its own sync and leaves nothing behind in the session. Checked by the statement's first
/// keyword, after leading spaces, comments and parentheses; what a keyword cannot show (a function that calls
/// `set_config(..., false)` or takes a session-level advisory lock) is the caller's to avoid, and a batch that
/// ends with a transaction open is caught after its sync (the connection is closed, which rolls it back).
///
/// Runs on every shared statement, so it allocates nothing: it reads the statement's UTF-8 in place and compares
/// bytes: building strings here would cost a noticeable share of a loaded query (Benchmarks/History.md).
enum SharedStatementRules {
    /// First keywords refused, upper-case, with the kind of statement named to the caller.
    static let refused: [(keyword: [UInt8], kind: String)] =
        ["BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT", "SAVEPOINT", "RELEASE", "PREPARE"].map {
            (Array($0.utf8), "transaction control")
        }
        + ["SET", "RESET", "DISCARD", "LISTEN", "UNLISTEN", "DECLARE", "CLOSE", "FETCH", "MOVE", "DEALLOCATE", "LOAD"]
        .map { (Array($0.utf8), "session state") }
        + [(Array("COPY".utf8), "COPY")]

    /// Throws ``PostgresError/Code/invalidQuery`` for a statement that may not be shared; the message names the
    /// kind of statement, never the statement's text.
    static func check(_ sql: String) throws {
        var sql = sql
        if let refusal = sql.withUTF8(refusal(in:)) {
            throw PostgresError(.invalidQuery, refusal)
        }
    }

    /// Why the statement in `bytes` may not be shared, or `nil`.
    static func refusal(in bytes: UnsafeBufferPointer<UInt8>) -> String? {
        var words = LeadingWords(bytes)
        guard let first = words.next() else { return nil }
        for (keyword, kind) in refused where first.isKeyword(keyword) {
            return "a \(kind) statement cannot share a connection: use withConnection for it (it runs alone there)"
        }
        // CREATE TEMP / TEMPORARY / LOCAL TEMP[ORARY] / GLOBAL TEMP[ORARY] TABLE: a table of this session.
        guard first.isKeyword(Keywords.create), var second = words.next() else { return nil }
        if second.isKeyword(Keywords.local) || second.isKeyword(Keywords.global) {
            guard let third = words.next() else { return nil }
            second = third
        }
        guard second.isKeyword(Keywords.temp) || second.isKeyword(Keywords.temporary) else { return nil }
        return "a temporary table belongs to its session and cannot share a connection: use withConnection for it"
    }

    private enum Keywords {
        static let create = Array("CREATE".utf8)
        static let local = Array("LOCAL".utf8)
        static let global = Array("GLOBAL".utf8)
        static let temp = Array("TEMP".utf8)
        static let temporary = Array("TEMPORARY".utf8)
    }
}

/// The words a statement begins with, read in place: letters and `_`, separated by spaces and `(`, skipping `--`
/// and (nested, as in PostgreSQL) `/* */` comments; anything else ends them.
struct LeadingWords {
    struct Word {
        let bytes: UnsafeBufferPointer<UInt8>.SubSequence

        /// Whether the word is `keyword` (upper-case ASCII), in any case.
        func isKeyword(_ keyword: [UInt8]) -> Bool {
            guard bytes.count == keyword.count else { return false }
            return zip(bytes, keyword).allSatisfy { byte, expected in byte & 0xDF == expected }
        }
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0
    private var ended = false

    init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    private func pair(_ at: Int, _ first: UInt8, _ second: UInt8) -> Bool {
        at + 1 < bytes.count && bytes[at] == first && bytes[at + 1] == second
    }

    private static func isLetter(_ byte: UInt8) -> Bool {
        (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "z")) || byte == UInt8(ascii: "_")
    }

    private static func isSeparator(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\n")
            || byte == UInt8(ascii: "\r") || byte == UInt8(ascii: "(")
    }

    /// The next word, or `nil` at the end of the leading words.
    mutating func next() -> Word? {
        while !ended, index < bytes.count {
            let byte = bytes[index]
            if pair(index, UInt8(ascii: "-"), UInt8(ascii: "-")) {
                while index < bytes.count, bytes[index] != UInt8(ascii: "\n") { index += 1 }
            } else if pair(index, UInt8(ascii: "/"), UInt8(ascii: "*")) {
                skipBlockComment()
            } else if Self.isSeparator(byte) {
                index += 1
            } else if Self.isLetter(byte) {
                let start = index
                while index < bytes.count, Self.isLetter(bytes[index]) { index += 1 }
                return Word(bytes: bytes[start..<index])
            } else {
                ended = true
            }
        }
        return nil
    }

    private mutating func skipBlockComment() {
        var depth = 0
        repeat {
            if pair(index, UInt8(ascii: "/"), UInt8(ascii: "*")) {
                depth += 1
                index += 2
            } else if pair(index, UInt8(ascii: "*"), UInt8(ascii: "/")) {
                depth -= 1
                index += 2
            } else {
                index += 1
            }
        } while depth > 0 && index < bytes.count
    }
}
