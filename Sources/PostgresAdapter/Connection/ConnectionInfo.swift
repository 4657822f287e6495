import Foundation
import CLibPQ

/// Validates a conninfo string or `postgres://` URL with libpq, without ever echoing it (it may hold a
/// password).
enum ConnectionInfo {
    /// The password in `conninfo`, if any (to scrub it from libpq's messages), or an error if malformed.
    static func validate(_ conninfo: String) throws -> String? {
        var errorMessage: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(conninfo, &errorMessage) else {
            if let errorMessage { PQfreemem(errorMessage) }
            throw PostgresError(.invalidConfiguration, "malformed connection string or URL")
        }
        defer { PQconninfoFree(options) }
        var password: String?
        var cursor = options
        while let keyword = cursor.pointee.keyword {
            if String(cString: keyword) == "password", let value = cursor.pointee.val {
                password = String(cString: value)
            }
            cursor += 1
        }
        return password
    }

    /// libpq's message with the password (if any) removed.
    static func scrub(_ message: String, password: String?) -> String {
        var text = message.trimmingCharacters(in: .whitespacesAndNewlines)
        if let password, !password.isEmpty {
            text = text.replacingOccurrences(of: password, with: "********")
        }
        return text
    }
}
