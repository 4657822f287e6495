import ResourceKit
import ResourceKitObservation

/// `GET /resources`: the live resources as a JSON array, one object per resource with sorted keys (`age_seconds`,
/// `cancellation`, `deadline_in_seconds`, `id`, `kind`, `label`, `scope`). Written by hand: the module does not
/// import Foundation.
enum LiveResourcesJSON {
    static func render(_ snapshot: RegistrySnapshot, now: ContinuousClock.Instant = .now) -> String {
        let items = snapshot.live.map { resource -> String in
            let deadline = resource.info.deadline.map { number(PrometheusExposition.seconds($0 - now)) } ?? "null"
            let cancellation: String
            switch resource.cancellation {
            case nil: cancellation = "null"
            case .cancelled?: cancellation = "\"cancelled\""
            case .deadlineExceeded?: cancellation = "\"deadline_exceeded\""
            }
            return "{\"age_seconds\":\(number(PrometheusExposition.seconds(resource.age))),"
                + "\"cancellation\":\(cancellation),\"deadline_in_seconds\":\(deadline),"
                + "\"id\":\(resource.info.id.rawValue),\"kind\":\(string(resource.info.kindName)),"
                + "\"label\":\(string(resource.info.label)),\"scope\":\(string(resource.info.scopePath))}"
        }
        return "[" + items.joined(separator: ",") + "]\n"
    }

    static func number(_ value: Double) -> String {
        value.isFinite ? String(value) : "null"
    }

    /// A JSON string: quote, backslash and control characters escaped.
    static func string(_ value: String) -> String {
        var result = "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}
