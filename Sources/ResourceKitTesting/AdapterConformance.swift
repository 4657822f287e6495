import Foundation
public import ResourceKit

/// The conformance kit for adapter authors: describe how to make your resource and start one blocking
/// operation on it, run the kit from your own tests, and read what it found.
///
/// ```swift
/// @Test func conformsToTheResourceKitContract() async throws {
///     let kit = AdapterConformance("ChildProcess",
///         make: { scope in try await ChildProcess.spawn(["/bin/cat"], in: scope) },
///         blockingOperation: { process in _ = try await process.read(upTo: 1) },
///         completeOperation: { process in try process.send("x") })
///     let report = await kit.run()
///     #expect(report.passed, "\(report)")
/// }
/// ```
///
/// The checks use real threads and real time: cancel before the operation starts, while it blocks and after
/// it completed; cancel twice and from several threads at once; `cancel()` must return within
/// ``Bounds/cancelCall`` (median) and must never touch a descriptor it no longer owns; the operation must
/// return within ``Bounds/promptReturn`` of a cancel and throw `CancellationError` (not an error of its
/// own); a scope of the caller's that borrows the resource must stop it too, and not before the `onCancel` of a
/// `withResourceOperation` around it ran (the one hook order); the scope must close the resource exactly once
/// (after success, cancellation and failure) with every descriptor it opened released and nothing left in the
/// registry. Across its many-round checks it also reads the whole process's descriptors after every round:
/// descriptors opened round after round and still open at the end fail, whether the resource reported them or not.
///
/// Given a request/response pair (`exchange`) and a probe of the external work (`externalWorkRunning`), it
/// also checks what a cancel leaves behind: after at least 100 operation-level cancels at random points the
/// next exchange must get its own reply (no late reply leaks into it); a scope deadline must surface as
/// `DeadlineExceededError`; the external work must stop when the operation's task is cancelled and when the
/// resource is; and an operation started in a cancelled task must have no effect. Every failure says the fix.
///
/// Give it `ownedDescriptors` (the resource's own descriptors) so that the leak check looks at exactly those:
/// then tests running in parallel in the same process cannot move it. Without them it diffs `/proc/self/fd`
/// across `make`, and descriptors opened by tests running at the same time would be attributed to the adapter.
/// Run it in a serialized test either way: its timing checks want the cores.
public struct AdapterConformance<Resource: ManagedResource>: Sendable {
    /// Time limits of the checks.
    public struct Bounds: Sendable {
        /// The median time of one `cancel()` call. It must never block.
        public var cancelCall: Duration = .milliseconds(1)
        /// From a cancel to the blocked operation returning.
        public var promptReturn: Duration = .milliseconds(250)
        /// The longest the kit waits, after starting the operation, for the resource's registry to count it as
        /// running (an operation or a wait bound to the handle): the kit cancels as soon as it does, or after this
        /// long if it never does (an operation that waits outside ResourceKit is never counted).
        public var settle: Duration = .milliseconds(50)
        /// How long the kit waits for an operation that should have returned before it reports a hang.
        public var hang: Duration = .seconds(2)
        /// Rounds of the reuse check (cancel at a random point, then an exchange).
        public var reuseRounds = 100
        /// The scope deadline of the deadline check, from the scope's start (`make` runs within it).
        public var deadline: Duration = .milliseconds(500)
        /// From the cancelled operation's return to the probe seeing the external work stopped: "at once". Far
        /// above what the shipped adapters' probes need on a loaded 2-core VM (each kit report prints the figure),
        /// and below 200 ms, so that work which goes on that long is caught. Raise it for a probe that is slow to
        /// answer. Also the bound, with no probe, on the median time from cancelling a parked operation to the next
        /// exchange's reply in the reuse check: a shared connection is free again only once the server stopped.
        public var externalStop: Duration = .milliseconds(150)
        /// How long the probe must keep saying "stopped" once it first did: work that goes on (a probe that
        /// looked in a gap) shows up again within it.
        public var externalQuiet: Duration = .milliseconds(250)
        /// Exchanges after each operation-level cancel in the reuse check: each must get its own reply (a late
        /// cancel or reply can reach the second or third operation, not only the next one).
        public var reuseWindow = 3
        /// ... and for at least this long, back to back: a cancel delivered late (an interrupt from a detached
        /// task) lands on whichever operation runs then.
        public var reuseWindowTime: Duration = .milliseconds(5)
        /// With one blocking operation per core, the longest a new cooperative-pool task may wait to run.
        public var starvation: Duration = .seconds(1)
        /// Rounds of the cancel-at-the-start check (a random pause of up to 500 µs, then a cancel).
        public var startRounds = 200

        public init() {}
    }

    /// The adapter's name in the report.
    public let name: String
    /// The time limits.
    public var bounds: Bounds

    let make: @Sendable (ResourceScope) async throws -> Resource
    let operation: @Sendable (Resource) async throws -> Void
    let complete: (@Sendable (Resource) async throws -> Void)?
    let testSideDescriptors: (@Sendable (Resource) -> [Int32])?
    let ownedDescriptors: (@Sendable (Resource) -> [Int32])?
    let exchange: (@Sendable (Resource, String) async throws -> String)?
    let externalWorkRunning: (@Sendable (Resource) async throws -> Bool)?
    /// The whole process's descriptors round by round, during one ``run()``.
    var processRounds: ProcessDescriptorRounds?

    /// Describes the adapter.
    /// - Parameters:
    ///   - name: the adapter's name in the report.
    ///   - bounds: the time limits of the checks.
    ///   - make: creates the resource and registers it in the given scope (as the adapter's public API does).
    ///   - blockingOperation: one operation that blocks until something outside happens (a read on a silent
    ///     peer, a query waiting on a lock).
    ///   - completeOperation: makes a blocked `blockingOperation` complete (write to the peer, release the
    ///     lock); without it, the "cancel after completion" check is skipped.
    ///   - ownedDescriptors: the descriptors the resource owns now (its socket, its pipe ends, and whatever it
    ///     opened since: a cancel path's control connection, a reconnect). The kit asks once the resource is made,
    ///     while an operation blocks, and again before each check's scope ends; the leak check then looks at
    ///     exactly these, and tests running at the same time cannot move it. Without it the
    ///     check diffs the whole process's descriptors across `make`, which is only right when nothing else in
    ///     the process opens or closes descriptors meanwhile (a serialized run with no other suite).
    ///   - testSideDescriptors: with the diff only: descriptors that `make` opened for the test's side (a peer
    ///     socket, a FIFO's writer), which the resource does not own: they are left out of the leak check.
    ///   - exchange: one request and its reply: sends a request carrying `token` and returns the reply, which
    ///     must be `token` (an echo, `SELECT $1`). Enables the reuse and checkpoint checks.
    ///   - externalWorkRunning: "is the blocking operation's work still running outside the process?" (a
    ///     server-side status query, a process table look-up), asked every few milliseconds. Enables the
    ///     external-work checks for both levels of cancellation, and the checkpoint's effect check.
    public init(
        _ name: String,
        bounds: Bounds = Bounds(),
        make: @escaping @Sendable (ResourceScope) async throws -> Resource,
        blockingOperation: @escaping @Sendable (Resource) async throws -> Void,
        completeOperation: (@Sendable (Resource) async throws -> Void)? = nil,
        ownedDescriptors: (@Sendable (Resource) -> [Int32])? = nil,
        testSideDescriptors: (@Sendable (Resource) -> [Int32])? = nil,
        exchange: (@Sendable (Resource, _ token: String) async throws -> String)? = nil,
        externalWorkRunning: (@Sendable (Resource) async throws -> Bool)? = nil
    ) {
        self.name = name
        self.bounds = bounds
        self.make = make
        self.operation = blockingOperation
        self.complete = completeOperation
        self.ownedDescriptors = ownedDescriptors
        self.testSideDescriptors = testSideDescriptors
        self.exchange = exchange
        self.externalWorkRunning = externalWorkRunning
    }

    /// Runs every check and returns the report. Never throws and never hangs: an operation that ignores
    /// cancellation is reported and abandoned after ``Bounds/hang``. The one exception is an operation that
    /// blocks a cooperative-pool thread and that even the resource's `cancel()` cannot stop: the first check finds
    /// the blocked pool and skips the rest, but it cannot take the threads back.
    ///
    /// Cancellation: the checks run on tasks of their own and always run to the end (each bounded by
    /// ``Bounds/hang``); cancelling the caller does not stop the run or change its report.
    public func run() async -> ConformanceReport {
        // First: an operation that holds a cooperative-pool thread would stall every later check (and the kit).
        let (pool, starved) = await cooperativePoolStaysFree()
        guard !starved else {
            let rest = Self.skipped(
                "the other checks", "not run: with the cooperative pool held by the operations, they would stall")
            return ConformanceReport(adapter: name, checks: [pool, rest])
        }
        var kit = self
        kit.processRounds = ProcessDescriptorRounds()
        return ConformanceReport(adapter: name, checks: [pool] + (await kit.checksAfterThePool()))
    }

    private func checksAfterThePool() async -> [ConformanceReport.Check] {
        var checks: [ConformanceReport.Check] = []
        checks.append(await cancelBeforeStart())
        checks.append(await cancelWhileBlocked(viaScope: false))
        checks.append(await cancelWhileBlocked(viaScope: true))
        checks.append(await hooksRunBeforeTheReturn())
        checks.append(await cancelAfterCompletion())
        checks.append(await cancelIsFastAndIdempotent())
        checks.append(await closedOnceAfterFailure())
        checks.append(await operationDescriptorsReleased())
        checks.append(await reuseAfterOperationCancel())
        checks.append(await deadlineSurfacesAsDeadlineExceeded())
        checks.append(await externalWorkStops(viaResource: false))
        checks.append(await externalWorkStops(viaResource: true))
        checks.append(await checkpoint())
        checks.append(await cancelAtTheStart())
        checks.append(processDescriptorsAcrossRounds())
        return checks
    }
}
