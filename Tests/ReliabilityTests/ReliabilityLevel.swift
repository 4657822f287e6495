import Foundation

/// How hard the reliability suite pushes: the short form runs in `swift test` and CI; the long form runs
/// with `RESOURCEKIT_RELIABILITY=long`: `RESOURCEKIT_RELIABILITY=long swift test --filter RandomCancellationTests`
/// (alone, so that descriptor counts are exact), then `--filter
/// "FaultInjectionTests|BadInputTests|PostgresFaultTests"`.
enum ReliabilityLevel {
    static let isLong = ProcessInfo.processInfo.environment["RESOURCEKIT_RELIABILITY"] == "long"

    static func iterations(short: Int, long: Int) -> Int { isLong ? long : short }
}

/// Counts of what a reliability run did, printed so the long form's numbers can be quoted.
struct ReliabilityCounts: CustomStringConvertible {
    var iterations = 0
    var completed = 0
    /// Cancelled, in the mode that cancels right after the task starts: usually before the query was sent,
    /// but the test cannot see which; only "cancelled" is measured.
    var cancelledEarly = 0
    /// Cancelled in the mode that cancels after a random pause: in flight, or before the send on a slow start.
    var cancelledLater = 0
    var cancelledAfterCompletion = 0
    var stray57014 = 0
    var otherErrors = 0

    var description: String {
        """
        \(iterations) iterations: \(completed) completed, \(cancelledEarly) cancelled right after the start \
        (mostly before send), \(cancelledLater) cancelled after a pause (mostly in flight), \
        \(cancelledAfterCompletion) after completion; \(stray57014) stray 57014, \(otherErrors) other errors
        """
    }
}
