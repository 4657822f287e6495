/// Which statements may share a connection with other tasks' statements (``PostgresPool/execute(_:_:)``): one
/// that ends with its own sync and leaves nothing behind in the session. Checked by the statement's first
/// keyword, after leading spaces, comments and parentheses; what a keyword cannot show (a function that calls
/// `set_config(..., false)` or takes a session-level advisory lock) is the caller's to avoid, and a statement that
/// leaves a transaction open is caught after its sync (the connection is closed, which rolls it back).
enum SharedStatementRules {
    /// First keywords refused, with the reason given to the caller.
    static let refused: [String: String] = {
        var table: [String: String] = [:]
        for keyword in ["BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT", "SAVEPOINT", "RELEASE", "PREPARE"] {
            table[keyword] = "transaction control"
        }
        for keyword in [
            "SET", "RESET", "DISCARD", "LISTEN", "UNLISTEN", "DECLARE", "CLOSE", "FETCH", "MOVE",
            "DEALLOCATE", "LOAD",
        ] {
            table[keyword] = "session state"
        }
        table["COPY"] = "COPY"
        return table
    }()

    /// Throws ``PostgresError/Code/invalidQuery`` for a statement that may not be shared; the message names the
    /// kind of statement, never the statement's text.
    static func check(_ sql: String) throws {
        let words = leadingWords(sql, count: 3)
        guard let first = words.first else { return }
        if let reason = refused[first] {
            throw PostgresError(
                .invalidQuery,
                "a \(reason) statement cannot share a connection: use withConnection for it (it runs alone there)")
        }
        // CREATE TEMP / TEMPORARY / LOCAL TEMP[ORARY] / GLOBAL TEMP[ORARY] TABLE: a table of this session.
        let temporary: Set<String> = ["TEMP", "TEMPORARY"]
        let createsTemporary =
            words.count > 1
            && (temporary.contains(words[1])
                || (["LOCAL", "GLOBAL"].contains(words[1]) && words.count > 2 && temporary.contains(words[2])))
        if first == "CREATE", createsTemporary {
            throw PostgresError(
                .invalidQuery,
                "a temporary table belongs to its session and cannot share a connection: use withConnection for it")
        }
    }

    /// The first `count` words of `sql`, upper-cased, skipping spaces, `--` and `/* */` comments (nested, as in
    /// PostgreSQL) and `(`; anything else ends the leading words.
    static func leadingWords(_ sql: String, count: Int) -> [String] {
        let bytes = Array(sql.utf8)
        func pair(_ index: Int, _ first: Character, _ second: Character) -> Bool {
            index + 1 < bytes.count && bytes[index] == first.asciiValue && bytes[index + 1] == second.asciiValue
        }
        var words: [String] = []
        var word: [UInt8] = []
        func endWord() {
            if !word.isEmpty { words.append(String(decoding: word, as: UTF8.self).uppercased()) }
            word = []
        }
        var index = 0
        while index < bytes.count, words.count < count {
            if pair(index, "-", "-") {
                endWord()
                while index < bytes.count, bytes[index] != UInt8(ascii: "\n") { index += 1 }
                continue
            }
            if pair(index, "/", "*") {
                endWord()
                var depth = 0
                repeat {
                    if pair(index, "/", "*") {
                        depth += 1
                        index += 2
                    } else if pair(index, "*", "/") {
                        depth -= 1
                        index += 2
                    } else {
                        index += 1
                    }
                } while depth > 0 && index < bytes.count
                continue
            }
            let character = Character(Unicode.Scalar(bytes[index]))
            if character.isASCII, character.isLetter || character == "_" {
                word.append(bytes[index])
            } else if character.isWhitespace || character == "(" {
                endWord()
            } else {
                break
            }
            index += 1
        }
        endWord()
        return Array(words.prefix(count))
    }
}
