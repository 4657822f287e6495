public import Foundation

/// A value bound to a query parameter, in Postgres's text format with an explicit type.
public struct PostgresBind: Sendable, Hashable {
    /// The text representation, `nil` for SQL NULL.
    public let text: String?
    /// The parameter's type OID (0 lets the server infer it).
    public let oid: UInt32

    public init(text: String?, oid: UInt32) {
        self.text = text
        self.oid = oid
    }

    /// SQL NULL of an unspecified type.
    public static let null = PostgresBind(text: nil, oid: 0)
}

/// A Swift value that can be bound as a parameter.
public protocol PostgresEncodable: Sendable {
    var postgresBind: PostgresBind { get }
}

/// A Swift value that can be decoded from a result column (text format).
public protocol PostgresDecodable: Sendable {
    /// Decodes from the column's text; `nil` text is SQL NULL.
    static func decode(text: String?, oid: UInt32) throws -> Self
}

enum OID {
    static let bool: UInt32 = 16, bytea: UInt32 = 17, int8: UInt32 = 20, int2: UInt32 = 21, int4: UInt32 = 23
    static let text: UInt32 = 25, float4: UInt32 = 700, float8: UInt32 = 701, varchar: UInt32 = 1043
    static let timestamptz: UInt32 = 1184, uuid: UInt32 = 2950, numeric: UInt32 = 1700
}

func decodingError(_ type: Any.Type, _ text: String?) -> PostgresError {
    PostgresError(
        .decoding, text == nil ? "NULL cannot be decoded as \(type)" : "the column's value cannot be decoded as \(type)"
    )
}

extension Int: PostgresEncodable, PostgresDecodable {
    public var postgresBind: PostgresBind { PostgresBind(text: String(self), oid: OID.int8) }
    public static func decode(text: String?, oid: UInt32) throws -> Int {
        guard let text, let value = Int(text) else { throw decodingError(Int.self, text) }
        return value
    }
}

extension Int64: PostgresEncodable, PostgresDecodable {
    public var postgresBind: PostgresBind { PostgresBind(text: String(self), oid: OID.int8) }
    public static func decode(text: String?, oid: UInt32) throws -> Int64 {
        guard let text, let value = Int64(text) else { throw decodingError(Int64.self, text) }
        return value
    }
}

extension Int32: PostgresEncodable, PostgresDecodable {
    public var postgresBind: PostgresBind { PostgresBind(text: String(self), oid: OID.int4) }
    public static func decode(text: String?, oid: UInt32) throws -> Int32 {
        guard let text, let value = Int32(text) else { throw decodingError(Int32.self, text) }
        return value
    }
}

extension Double: PostgresEncodable, PostgresDecodable {
    public var postgresBind: PostgresBind {
        let text = isNaN ? "NaN" : isInfinite ? (self > 0 ? "Infinity" : "-Infinity") : String(self)
        return PostgresBind(text: text, oid: OID.float8)
    }
    public static func decode(text: String?, oid: UInt32) throws -> Double {
        switch text {
        case "NaN": return .nan
        case "Infinity": return .infinity
        case "-Infinity": return -.infinity
        default:
            guard let text, let value = Double(text) else { throw decodingError(Double.self, text) }
            return value
        }
    }
}

extension Bool: PostgresEncodable, PostgresDecodable {
    public var postgresBind: PostgresBind { PostgresBind(text: self ? "t" : "f", oid: OID.bool) }
    public static func decode(text: String?, oid: UInt32) throws -> Bool {
        switch text {
        case "t", "true": return true
        case "f", "false": return false
        default: throw decodingError(Bool.self, text)
        }
    }
}

extension String: PostgresEncodable, PostgresDecodable {
    public var postgresBind: PostgresBind { PostgresBind(text: self, oid: OID.text) }
    public static func decode(text: String?, oid: UInt32) throws -> String {
        guard let text else { throw decodingError(String.self, text) }
        return text
    }
}

/// Bytes (`bytea`), as the hex text format.
public struct PostgresBytes: PostgresEncodable, PostgresDecodable, Hashable {
    public let bytes: [UInt8]
    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public var postgresBind: PostgresBind {
        let hex = bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }
            .joined()
        return PostgresBind(text: "\\x" + hex, oid: OID.bytea)
    }

    public static func decode(text: String?, oid: UInt32) throws -> PostgresBytes {
        guard let text, text.hasPrefix("\\x"), text.utf8.count % 2 == 0 else {
            throw decodingError(PostgresBytes.self, text)
        }
        var bytes: [UInt8] = []
        var index = text.index(text.startIndex, offsetBy: 2)
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            guard let byte = UInt8(text[index..<next], radix: 16) else { throw decodingError(PostgresBytes.self, text) }
            bytes.append(byte)
            index = next
        }
        return PostgresBytes(bytes)
    }
}

extension UUID: PostgresEncodable, PostgresDecodable {
    public var postgresBind: PostgresBind { PostgresBind(text: uuidString.lowercased(), oid: OID.uuid) }
    public static func decode(text: String?, oid: UInt32) throws -> UUID {
        guard let text, let value = UUID(uuidString: text) else { throw decodingError(UUID.self, text) }
        return value
    }
}

extension Date: PostgresEncodable, PostgresDecodable {
    /// Bound as `timestamptz` in UTC with microseconds.
    public var postgresBind: PostgresBind {
        let micros = (timeIntervalSince1970 * 1_000_000).rounded()
        let seconds = Int64((micros / 1_000_000).rounded(.down))
        let fraction = Int64(micros) - seconds * 1_000_000
        return PostgresBind(text: "epoch", oid: OID.timestamptz).replacingText(
            "\(Self.civil(seconds)).\(String(format: "%06lld", fraction))+00"
        )
    }

    /// Decodes the ISO text form, `YYYY-MM-DD HH:MM:SS[.ffffff]±HH[:MM[:SS]]`.
    public static func decode(text: String?, oid: UInt32) throws -> Date {
        guard let text else { throw decodingError(Date.self, text) }
        let scalars = Array(text.utf8)
        func number(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= scalars.count else { return nil }
            return Int(String(decoding: scalars[range], as: UTF8.self))
        }
        guard scalars.count >= 22, let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19)
        else {
            throw decodingError(Date.self, text)
        }
        var index = 19
        var fraction = 0.0
        if scalars[index] == UInt8(ascii: ".") {
            var end = index + 1
            while end < scalars.count, scalars[end] >= UInt8(ascii: "0"), scalars[end] <= UInt8(ascii: "9") { end += 1 }
            fraction = Double("0" + String(decoding: scalars[index..<end], as: UTF8.self)) ?? 0
            index = end
        }
        guard index < scalars.count, scalars[index] == UInt8(ascii: "+") || scalars[index] == UInt8(ascii: "-") else {
            throw decodingError(Date.self, text)
        }
        let sign = scalars[index] == UInt8(ascii: "-") ? -1 : 1
        let offsetHours = number((index + 1)..<(index + 3)) ?? 0
        let offsetMinutes =
            (index + 3 < scalars.count && scalars[index + 3] == UInt8(ascii: ":"))
            ? (number((index + 4)..<(index + 6)) ?? 0) : 0
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds =
            Double(days * 86_400 + hour * 3600 + minute * 60 + second) + fraction
            - Double(sign * (offsetHours * 3600 + offsetMinutes * 60))
        return Date(timeIntervalSince1970: seconds)
    }

    /// Howard Hinnant's days-from-civil.
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civil(_ seconds: Int64) -> String {
        let days = Int(seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400)
        let secondsOfDay = Int(seconds - Int64(days) * 86_400)
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        return String(
            format: "%04d-%02d-%02d %02d:%02d:%02d", year, month, day,
            secondsOfDay / 3600, (secondsOfDay % 3600) / 60, secondsOfDay % 60)
    }
}

extension PostgresBind {
    func replacingText(_ text: String) -> PostgresBind { PostgresBind(text: text, oid: oid) }
}

extension Optional: PostgresEncodable where Wrapped: PostgresEncodable {
    public var postgresBind: PostgresBind {
        switch self {
        case .some(let value): return value.postgresBind
        case .none: return .null
        }
    }
}

extension Optional: PostgresDecodable where Wrapped: PostgresDecodable {
    public static func decode(text: String?, oid: UInt32) throws -> Wrapped? {
        guard let text else { return nil }
        return try Wrapped.decode(text: text, oid: oid)
    }
}
