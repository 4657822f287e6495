public import ResourceKit
public import ResourceKitTesting

/// Runs the conformance kit for one of this repository's adapters, once, holding the test gate.
///
/// Once: a failed check is a finding. The retry this function had hid two: the composed command client's lost stop (a
/// cancel the task's handler never delivered; Docs/Architecture.md, "The cancel tree") and its test server's lost
/// `RELEASE` (one that overtook its command).
public func runConformance<Resource: ManagedResource>(_ kit: AdapterConformance<Resource>) async throws
    -> ConformanceReport
{
    let kit = kit.inTheTestProcess
    return try await exclusively { await kit.run() }
}

extension AdapterConformance {
    /// The kit with its starvation bound (a new cooperative-pool task must run while one operation per core
    /// blocks) widened from the 1 s meant for an adapter author's quiet process to ``TimingBound/singleShot``.
    /// The test gate keeps heavy tests apart, but a burst of light ones (every Postgres test starting the moment
    /// the shared cluster is up) stalled a new task for over a second under the thread sanitizer, and a seeded
    /// bug's run then failed at that check instead of its own. A pool held by a blocking call stays held until the
    /// kit cancels the scope, so the wider bound still tells the two apart.
    public var inTheTestProcess: Self {
        var kit = self
        kit.bounds.starvation = max(kit.bounds.starvation, TimingBound.singleShot)
        return kit
    }
}
