import Foundation

/// One JSON object on one line (for `--json` output), encoded by Foundation's `JSONSerialization` with sorted
/// keys; non-finite numbers become `null`.
package struct JSONLine: Sendable {
    /// A value in the object.
    package enum Value: Sendable, Equatable {
        case string(String)
        case int(Int64)
        case double(Double)
        case bool(Bool)
        case null
    }

    private var fields: [String: Value] = [:]

    /// An object with these fields.
    package init(_ fields: KeyValuePairs<String, Value> = [:]) {
        for (key, value) in fields { self.fields[key] = value }
    }

    /// Sets (or replaces) one field.
    package mutating func set(_ key: String, _ value: Value) {
        fields[key] = value
    }

    /// The object as compact JSON text.
    package var text: String {
        let object = fields.mapValues { value -> Any in
            switch value {
            case .string(let text): text
            case .int(let number): number
            case .double(let number): number.isFinite ? number : NSNull()
            case .bool(let flag): flag
            case .null: NSNull()
            }
        }
        guard
            let data = try? JSONSerialization.data(
                withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes, .fragmentsAllowed])
        else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }
}
