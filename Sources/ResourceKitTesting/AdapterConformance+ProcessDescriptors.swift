import ResourceKit

/// The whole process's descriptors, read after every round of the kit's many-round checks: which descriptors
/// appeared, and in which round. A resource that opens a descriptor per cancel or per operation and never closes
/// it (a kill connection per cancel, a `dup` in `onCancel`), and never reports it in `ownedDescriptors`, leaves
/// one behind in round after round; a test running beside the kit opens its descriptors in a few bursts.
final class ProcessDescriptorRounds: Sendable {
    /// A descriptor as the process saw it: the same number on another target is another descriptor.
    private struct Key: Hashable {
        let fd: Int32
        let target: String
    }

    private struct State {
        var rounds = 0
        var firstSeen: [Key: Int] = [:]
    }

    /// The descriptors open before the first round.
    let start: DescriptorLedger
    private let state = Locked(State())

    init() {
        start = DescriptorLedger.now()
    }

    /// Reads the process's descriptors at the end of one round.
    func sample() {
        let now = DescriptorLedger.now()
        state.withLock { state in
            state.rounds += 1
            for (fd, target) in now.entries where start.entries[fd] != target {
                let key = Key(fd: fd, target: target)
                if state.firstSeen[key] == nil { state.firstSeen[key] = state.rounds }
            }
        }
    }

    /// What is still open in `end` that appeared during the rounds: the descriptors, and the distinct rounds in
    /// which they first appeared, out of all rounds read.
    func leftOpen(at end: DescriptorLedger) -> (descriptors: [Int32: String], inRounds: Int, of: Int) {
        state.withLock { state in
            var descriptors: [Int32: String] = [:]
            var rounds: Set<Int> = []
            for (fd, target) in end.entries {
                guard let round = state.firstSeen[Key(fd: fd, target: target)] else { continue }
                descriptors[fd] = target
                rounds.insert(round)
            }
            return (descriptors, rounds.count, state.rounds)
        }
    }
}

extension AdapterConformance {
    /// Across the many-round checks (the reuse rounds and the cancels at the start), the whole process's
    /// descriptors: those that appeared during the rounds and are still open once every scope ended fail the
    /// check when they first appeared in at least a quarter of the rounds (and in at least 10): a descriptor left
    /// behind by a cancel or an operation, round after round, that the resource never reported. It needs no
    /// `ownedDescriptors`. Tests running beside the kit in the same process open and close descriptors too; to
    /// pass for a leak, theirs would have to appear in that many separate rounds and stay open past the kit's end.
    func processDescriptorsAcrossRounds() -> ConformanceReport.Check {
        let name = "the process's descriptors across the kit's rounds"
        guard let processRounds else { return Self.skipped(name, "no rounds were run") }
        let end = DescriptorLedger.now()
        let (left, inRounds, rounds) = processRounds.leftOpen(at: end)
        guard rounds > 0 else { return Self.skipped(name, "no rounds were run") }
        let measurement = """
            \(processRounds.start.count) descriptor(s) before the first round, \(end.count) after the last \
            check; \(left.count) opened during the \(rounds) rounds still open, first seen in \(inRounds) of them
            """
        var failure: String?
        if inRounds >= max(10, rounds / 4) {
            failure = """
                \(left.count) descriptor(s) (\(Self.kinds(of: left))) opened in \(inRounds) of the \
                kit's \(rounds) rounds were still open after every scope had ended: something opens a descriptor \
                per cancel or per operation (a kill connection, a dup in onCancel) and never closes it, and the \
                resource does not report it in ownedDescriptors. Close what the cancel path opens once its stop was \
                sent (or keep one control connection per resource, as ControlChannel does, and close it in \
                close()), and report it in ownedDescriptors while it is open.
                """
        }
        return ConformanceReport.Check(name: name, failure: failure, measurements: [measurement], skipped: false)
    }
}
