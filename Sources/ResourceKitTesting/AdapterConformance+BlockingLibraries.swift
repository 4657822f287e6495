import Foundation
@_spi(Testing) import ResourceKit
import Synchronization

/// The checks for adapters over blocking C libraries (SQLite, vendor SDKs): a blocking call must not hold a
/// thread of the cooperative pool, and a cancel that lands just as the call starts must not be lost. They need
/// nothing from the author beyond `make` and the blocking operation; the second also asks the external-work
/// probe, if given, whether anything is left running.
extension AdapterConformance {
    /// As many blocking operations as the machine has cores, each on a resource of its own: a new task on the
    /// cooperative pool must still run within ``Bounds/starvation``. Watched from a thread of its own, since a
    /// starved pool cannot run the kit either; at the bound that thread cancels the scope (the resources'
    /// `cancel()` must then stop the calls) so that the report can be written.
    func cooperativePoolStaysFree() async -> (check: ConformanceReport.Check, starved: Bool) {
        let name = "the cooperative pool stays free while operations block"
        let count = max(ProcessInfo.processInfo.activeProcessorCount, 2)
        let starved = Locked(false)
        let check = await withFreshResource(name) { scope, first, _, problems, measurements in
            var resources = [first]
            for _ in 1..<count {
                guard let more = try? await make(scope) else {
                    problems.append("make threw while the check made \(count) resources; it could not run.")
                    return
                }
                resources.append(more)
            }
            let tasks = resources.map { Self.start(operation, on: $0).0 }
            let watch = StarvationWatch(settle: bounds.settle, bound: bounds.starvation, scope: scope)
            let latency = await watch.run()
            scope.cancel()
            for task in tasks { _ = await Self.wait(for: task, upTo: bounds.hang) }
            if let latency {
                measurements.append(
                    "with \(count) operations blocked, a new cooperative-pool task ran after \(Self.text(latency))")
            } else {
                starved.withLock { $0 = true }
                problems.append(
                    """
                    with \(count) operations blocked (one per core), a new task on the cooperative pool did not run \
                    within \(Self.text(bounds.starvation)): the blocking call runs on a cooperative-pool thread and \
                    holds it. Run it on a BlockingPool thread (BlockingPool.runInterruptible for a library with a \
                    native cancel, BlockingPool.run otherwise); never call a blocking C function from async code.
                    """
                )
            }
        }
        return (check, starved.withLock { $0 })
    }

    /// ``Bounds/startRounds`` rounds on one resource: start the operation, cancel its task the instant its wait
    /// registers (every other round) or after a random spin of up to 500 µs (before the call, as it starts, while
    /// it runs); every round must return promptly, and with a probe, no work may be left running at the end.
    func cancelAtTheStart() async -> ConformanceReport.Check {
        let name = "cancels at the start of the blocking call are never lost"
        return await withFreshResource(name) { scope, resource, _, problems, measurements in
            var slowest = Duration.zero
            for round in 0..<bounds.startRounds {
                let (task, returned) = Self.start(operation, on: resource)
                // Armed first, so that none of the kit's work runs while the operation returns (bound: from here).
                let watch = TaskWatch(task, upTo: bounds.settle + bounds.hang)
                if round.isMultiple(of: 2) {
                    // The instant the operation registered its wait: for a pool job, just before a thread picks it
                    // up and the library starts, the window in which SQLite clears a pending interrupt.
                    await Self.blocked(scope, within: bounds.settle)
                } else {
                    // A spin, not a sleep: a sleep's granularity would skip the few microseconds that matter.
                    let until = ContinuousClock.now + .microseconds(Int.random(in: 0...500))
                    while ContinuousClock.now < until {}
                }
                let cancelled = ContinuousClock.now
                task.cancel()
                let (ended, _) = await watch.ended()
                guard ended != nil else {
                    problems.append(
                        """
                        round \(round): the operation was still running \(Self.text(bounds.hang)) after a cancel \
                        that landed as it started: the cancel was lost. A library that clears a pending interrupt \
                        when its call starts (sqlite3_step does) needs the interrupt again while the call runs: use \
                        BlockingPool.runInterruptible (it delivers it again until the call returns), or stop from \
                        the library's progress callback when the call's interruption flag is set.
                        """
                    )
                    return
                }
                slowest = max(slowest, (returned.withLock { $0 } ?? .now) - cancelled)
                processRounds?.sample()
            }
            measurements.append("\(bounds.startRounds) rounds; slowest cancel to return \(Self.text(slowest))")
            guard let probe = externalWorkRunning else { return }
            let (stopped, _, probeError) = await Self.poll(probe, resource, until: false, within: bounds.externalStop)
            if let probeError {
                problems.append("the probe threw \(type(of: probeError)); the check could not tell.")
            } else if !stopped {
                // Watched on to the hang bound: a stop that came late and one that never came are different bugs.
                let (late, after, _) = await Self.poll(probe, resource, until: false, within: bounds.hang)
                let when =
                    late
                    ? "it stopped \(Self.text(bounds.externalStop + after)) after the check's end"
                    : "it was still running \(Self.text(bounds.externalStop + after)) after the check's end"
                problems.append(
                    """
                    after \(bounds.startRounds) cancelled operations the probe still saw work running \
                    \(Self.text(bounds.externalStop)) later (\(when)): a cancelled call went on in the library (the \
                    wait returned, the call did not). Interrupt the call itself (BlockingPool.runInterruptible), and \
                    let the wait end when the call returned.
                    """
                )
            }
        }
    }
}

/// Measures, from a thread outside the cooperative pool, how long a new task on that pool takes to start; at the
/// bound it cancels `scope`, which frees a pool held by blocking calls whose resources stop them on `cancel()`.
private final class StarvationWatch: Sendable {
    private let settle: Duration
    private let bound: Duration
    private let scope: ResourceScope
    private let ran = Atomic<Bool>(false)
    private let starved = Atomic<Bool>(false)
    private let result = Locked<Duration?>(nil)
    private let done = OneShotEvent()

    init(settle: Duration, bound: Duration, scope: ResourceScope) {
        self.settle = settle
        self.bound = bound
        self.scope = scope
    }

    /// The time a new cooperative-pool task took to run, or `nil` if it did not within the bound.
    func run() async -> Duration? {
        let thread = Thread { [self] in watch() }
        thread.name = "rk.kit.starvation"
        thread.start()
        try? await done.wait(shielded: true)
        return starved.load(ordering: .acquiring) ? nil : result.withLock { $0 }
    }

    private func watch() {
        usleep(UInt32(settle / .microseconds(1)))
        let started = ContinuousClock.now
        // Owner: this watch; the task only records when it ran, and the watch waits for it (bounded) below.
        Task.detached { [self] in
            let latency = ContinuousClock.now - started
            result.withLock { $0 = latency }
            ran.store(true, ordering: .releasing)
        }
        while !ran.load(ordering: .acquiring), ContinuousClock.now - started < bound {
            usleep(200)
        }
        // Decided here, at the bound: once the scope is cancelled the probe task may well run.
        if !ran.load(ordering: .acquiring) {
            starved.store(true, ordering: .releasing)
            scope.cancel()
        }
        done.set()
    }
}
