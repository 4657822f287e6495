/// A usage error: exit status 2, with a message that names the bad flag or value.
package struct UsageError: Error, Equatable, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// The flags of one command, parsed: `--flag value`, `--flag=value` and boolean `--flag`.
package struct Arguments: Sendable {
    /// The command these flags belong to.
    package let command: String
    private var values: [String: String] = [:]
    private var switches: Set<String> = []

    /// Parses `arguments` for `command`, which accepts `valueFlags` (taking a value) and `switchFlags`.
    package init(command: String, _ arguments: some Sequence<String>, valueFlags: Set<String>, switchFlags: Set<String>)
        throws
    {
        self.command = command
        var rest = Array(arguments)[...]
        while let argument = rest.popFirst() {
            guard argument.hasPrefix("--") else {
                throw UsageError("unexpected argument '\(argument)' for \(command)")
            }
            let parts = argument.split(separator: "=", maxSplits: 1)
            let flag = String(parts[0])
            if switchFlags.contains(flag) {
                guard parts.count == 1 else { throw UsageError("\(flag) takes no value") }
                switches.insert(flag)
            } else if valueFlags.contains(flag) {
                let value: String
                if parts.count == 2 {
                    value = String(parts[1])
                } else if let next = rest.popFirst() {
                    value = next
                } else {
                    throw UsageError("\(flag) needs a value")
                }
                guard values[flag] == nil else { throw UsageError("\(flag) given twice") }
                values[flag] = value
            } else {
                throw UsageError("unknown flag '\(flag)' for \(command)")
            }
        }
    }

    /// `true` if the switch `flag` was given.
    package func has(_ flag: String) -> Bool { switches.contains(flag) }

    /// The value of `flag`, if given.
    package func value(_ flag: String) -> String? { values[flag] }

    /// The value of `flag`; a usage error when it is missing or empty.
    package func required(_ flag: String) throws -> String {
        guard let value = values[flag], !value.isEmpty else { throw UsageError("\(command) needs \(flag)") }
        return value
    }

    /// The value of `flag` as a duration (``parseDuration(_:)``); a usage error when it is not one.
    package func duration(_ flag: String) throws -> Duration? {
        guard let text = values[flag] else { return nil }
        guard let duration = Arguments.parseDuration(text) else {
            throw UsageError("\(flag): '\(text)' is not a duration (examples: 500us, 250ms, 2s, 1.5s)")
        }
        return duration
    }

    /// The value of `flag` as a whole number in `range`; a usage error otherwise.
    package func integer(_ flag: String, in range: ClosedRange<Int>) throws -> Int? {
        guard let text = values[flag] else { return nil }
        guard let value = Int(text), range.contains(value) else {
            throw UsageError("\(flag): '\(text)' is not a whole number in \(range.lowerBound)...\(range.upperBound)")
        }
        return value
    }

    /// The value of `flag` as `HOST:PORT` (``parseHostPort(_:)``); a usage error when it is not one.
    package func hostPort(_ flag: String) throws -> (host: String, port: Int)? {
        guard let text = values[flag] else { return nil }
        guard let parsed = Arguments.parseHostPort(text) else {
            throw UsageError("\(flag): '\(text)' is not HOST:PORT (examples: 127.0.0.1:7070, [::1]:5432, localhost:80)")
        }
        return parsed
    }

    /// `500us`, `250ms`, `2s`, `1.5s` (also `µs`, `m`); nil for anything else, negatives and non-finite values.
    package static func parseDuration(_ text: String) -> Duration? {
        let units: [(suffix: String, seconds: Double)] = [
            ("us", 1e-6), ("µs", 1e-6), ("ms", 1e-3), ("s", 1), ("m", 60),
        ]
        for unit in units where text.hasSuffix(unit.suffix) {
            let number = text.dropLast(unit.suffix.count)
            guard !number.isEmpty, number.allSatisfy({ $0.isNumber || $0 == "." }),
                let value = Double(number), value.isFinite, value >= 0, value * unit.seconds <= 86_400 * 365
            else { return nil }
            return .nanoseconds(Int64((value * unit.seconds * 1e9).rounded()))
        }
        return nil
    }

    /// `host:port` or `[v6]:port`, port 0...65535.
    package static func parseHostPort(_ text: String) -> (host: String, port: Int)? {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                return nil
            }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":"), !text[..<colon].contains(":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty, let port = Int(portText), (0...65_535).contains(port) else { return nil }
        return (String(host), port)
    }
}
