import CHiredis

/// A Redis reply, copied out of hiredis's reply object.
public enum RedisReply: Sendable, Hashable {
    /// A bulk or simple string (`GET`, `ECHO`, `+OK`).
    case string(String)
    /// An integer (`INCR`, `CLIENT ID`).
    case integer(Int)
    /// An array (`BLPOP`'s key and value, `LRANGE`).
    case array([RedisReply])
    /// The nil reply (a missing key, a `BLPOP` that timed out).
    case null
    /// An error reply, with the server's message (`UNBLOCKED client unblocked via CLIENT UNBLOCK`).
    case error(String)

    init(_ reply: UnsafeMutablePointer<redisReply>) {
        let value = reply.pointee
        func text() -> String {
            guard let string = value.str else { return "" }
            return String(decoding: UnsafeRawBufferPointer(start: string, count: value.len), as: UTF8.self)
        }
        switch value.type {
        case REDIS_REPLY_STRING, REDIS_REPLY_STATUS: self = .string(text())
        case REDIS_REPLY_INTEGER: self = .integer(Int(value.integer))
        case REDIS_REPLY_ERROR: self = .error(text())
        case REDIS_REPLY_ARRAY:
            self = .array((0..<value.elements).map { RedisReply(value.element[$0]!) })
        default: self = .null
        }
    }

    /// The string, if this is one.
    public var string: String? {
        if case .string(let string) = self { return string }
        return nil
    }
}
