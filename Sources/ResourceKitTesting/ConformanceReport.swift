/// The result of ``AdapterConformance/run()``: one entry per check, each with what went wrong and how to fix it.
public struct ConformanceReport: Sendable, CustomStringConvertible {
    /// One check's result.
    public struct Check: Sendable, CustomStringConvertible {
        /// The check's name, such as `cancel before start`.
        public let name: String
        /// `nil` when the check passed; otherwise what the adapter did wrong and how to fix it.
        public let failure: String?
        /// What the check measured, for the record: a line per figure, such as the median time of `cancel()`.
        public let measurements: [String]
        /// `true` when the check could not run (a capability the description did not provide).
        public let skipped: Bool
        /// From the cancel to the blocked operation's return, taken inside the operation's task (no hop of the
        /// kit's in it, and none of its work: its bounded wait is armed before the cancel): set by the "cancel while
        /// blocked" checks.
        public internal(set) var cancelToReturn: Duration? = nil

        public var passed: Bool { failure == nil }

        public var description: String {
            let status = skipped ? "SKIP" : (passed ? "PASS" : "FAIL")
            var text = "[\(status)] \(name)"
            if !measurements.isEmpty { text += " (" + measurements.joined(separator: "; ") + ")" }
            if let failure { text += "\n       " + failure }
            return text
        }
    }

    /// The adapter's name, as given to the kit.
    public let adapter: String
    /// Every check, in the order run.
    public let checks: [Check]

    /// `true` when no check failed.
    public var passed: Bool { checks.allSatisfy(\.passed) }

    /// The failed checks.
    public var failures: [Check] { checks.filter { !$0.passed } }

    public var description: String {
        let failed = failures.count
        let header = "ResourceKit conformance for \(adapter): \(failed == 0 ? "passed" : "\(failed) check(s) failed")"
        return ([header] + checks.map { "  " + $0.description }).joined(separator: "\n")
    }

    /// Throws ``ConformanceFailure`` (whose description is this report) when a check failed.
    public func check() throws {
        if !passed { throw ConformanceFailure(report: self) }
    }
}

/// Thrown by ``ConformanceReport/check()``.
public struct ConformanceFailure: Error, CustomStringConvertible {
    public let report: ConformanceReport
    public var description: String { report.description }
}
