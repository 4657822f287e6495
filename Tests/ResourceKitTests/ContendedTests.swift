import CSystemShims
import Dispatch
import ResourceKitTesting
import Synchronization
import TestSupport
import Testing

@testable import ResourceKit
import ResourceKitObservation
@_spi(Testing) @testable import ResourceKitIO

/// Must show: 10,000 iterations of a scope with a real pipe resource, cancelled from other threads at a random
/// point (before start, during, after completion, twice, concurrently from 4 threads). Every resource is closed
/// exactly once, the registry ends empty, no pipe stays open, and the descriptor count returns to baseline.
/// The heavy and the timing-sensitive tests, one at a time: they load both cores, and a latency bound must
/// not measure another test's load.
@Suite(.serialized) struct ContendedTests {
    @Test func tenThousandRandomPointCancellations() async throws {
        try await exclusively {
            let registry = ResourceRegistry()
            let reactor = IOReactor(name: "test.reactor.race")
            defer { reactor.shutdown() }
            let cancellers = Cancellers()
            let baseline = DescriptorLedger.now().count
            var inodes = Set<UInt64>()
            var pipes: [PipeResource] = []
            var outcomes = (completed: 0, cancelled: 0)
            for i in 0..<10_000 {
                let pipe = try PipeResource(reactor: reactor)
                inodes.insert(pipe.inode)
                pipes.append(pipe)
                let mode = i % 5
                if mode == 2 { pipe.writeByte() }  // completes on its own: cancel lands after completion
                let task = Task {
                    try await withResourceScope("race", registry: registry) { scope in
                        let handle = try await scope.register(pipe, kind: PipeResource.kind, label: "pipe")
                        return try await pipe.readByte(boundTo: handle)
                    }
                }
                let spins = Int.random(in: 0..<3_000)
                switch mode {
                case 0: task.cancel()  // most likely before the operation starts
                case 1: cancellers.fire(4, spins: spins) { task.cancel() }  // concurrently from 4 threads
                case 2: cancellers.fire(1, spins: spins) { task.cancel() }
                case 3: cancellers.fire(2, spins: spins) { task.cancel() }  // twice
                default:
                    cancellers.fire(1, spins: spins) { pipe.writeByte() }  // completion races the cancel
                    cancellers.fire(1, spins: spins) { task.cancel() }
                }
                switch await task.result {
                case .success(let byte):
                    #expect(byte == 1)
                    outcomes.completed += 1
                case .failure(let error):
                    #expect(error is CancellationError, "unexpected \(error)")
                    outcomes.cancelled += 1
                }
            }
            cancellers.drain()
            #expect(outcomes.completed + outcomes.cancelled == 10_000)
            #expect(outcomes.completed >= 1_000)  // mode-2 iterations have data before they start; most complete
            #expect(outcomes.cancelled >= 2_000)
            let closedOnce = pipes.allSatisfy { $0.closeCount.load(ordering: .relaxed) == 1 }
            #expect(closedOnce)
            #expect(registry.liveCount == 0)
            #expect(reactor.waitingDescriptorCount == 0)
            #expect(DescriptorLedger.now().openPipes(inodes) == 0)
            let counters = registry.snapshot().counters[PipeResource.kind.name]
            #expect(counters?.acquired == counters?.closed)
            // Our pipes are all closed (above, exactly, by inode). The total catches any other descriptor that
            // these 10,000 iterations leak: one in five would leave 2,000 behind. It cannot be exact, because the
            // light suites run in parallel and hold descriptors of their own at this instant (91 more than the
            // baseline in one CI run, against the 64 this bound allowed before): far above that, far below a leak.
            #expect(
                DescriptorLedger.now().count < baseline + 2_000,
                "descriptors: baseline \(baseline), now \(DescriptorLedger.now().count)")
            print(
                """
                scope race: \(outcomes.completed) completed, \(outcomes.cancelled) cancelled, p50 cancel latency \
                \(counters?.cancellationLatency.p50.map { "\($0)" } ?? "-")
                """
            )
        }
    }

    /// Must show: a reactor wait on a pipe whose writer stays silent returns within 50 ms of `task.cancel()`.
    /// Five calm rounds (up to 20 attempts); the median of each round's latency beyond a reference task cancelled at
    /// the same instant must be within the bound (`CancelMeasurement`: a parallel test's CPU burst delays both).
    @Test func blockedPipeReadReturnsWithin50msOfCancel() async throws {
        try await exclusively {
            let reactor = IOReactor(name: "test.reactor.latency")
            defer { reactor.shutdown() }
            var rounds: [CancelMeasurement<Void>] = []
            var attempts = 0
            // A round counts when its reference returned within 10 ms: a moment when the parallel tests let the
            // scheduler answer at all. Under a burst both paths are delayed, the reactor's (two thread hops and a
            // close) more than the reference's, and such a round says nothing about the cancel path.
            while rounds.filter({ $0.reference < .milliseconds(10) }).count < 5, attempts < 20 {
                attempts += 1
                let registry = ResourceRegistry()
                let pipe = try PipeResource(reactor: reactor)
                let round = try await measureCancellation {
                    try await withResourceScope("latency", registry: registry) { scope in
                        let handle = try await scope.register(pipe, kind: PipeResource.kind, label: "pipe")
                        _ = try await pipe.readByte(boundTo: handle)
                    }
                } whenParked: {
                    // The event we wait for: the read is parked in the reactor.
                    try await until("a wait parks", reactor.waitingDescriptorCounts()) { $0 > 0 }
                }
                rounds.append(round)
                #expect(throws: CancellationError.self) { try round.result.get() }
                let cancels = pipe.cancelCount.load(ordering: .relaxed)
                let closes = pipe.closeCount.load(ordering: .relaxed)
                #expect(cancels == 1)
                #expect(closes == 1)
                #expect(registry.liveCount == 0)
                #expect(DescriptorLedger.now().openPipes([pipe.inode]) == 0)
                #expect(reactor.waitingDescriptorCount == 0)
                let latency = registry.snapshot().counters[PipeResource.kind.name]?.cancellationLatency
                #expect(latency?.count == 1)
            }
            let calm = rounds.filter { $0.reference < .milliseconds(10) }
            let counted = calm.count >= 5 ? calm : rounds
            #expect(
                median(counted.map(\.excess)) < TimingBound.median,
                "cancel-to-return \(rounds.map(\.latency)), reference \(rounds.map(\.reference))")
        }
    }

    /// Must hold 10,000 concurrent waits; all resume on cancellation and nothing is left registered.
    @Test func tenThousandConcurrentWaitsAllCancelled() async throws {
        try await exclusively {
            let reactor = IOReactor(name: "test.reactor.scale")
            defer { reactor.shutdown() }
            let baseline = DescriptorLedger.now().count
            let count = 10_000
            var fds: [Int32] = []
            for _ in 0..<count {
                let fd = rk_eventfd_create()
                try #require(fd >= 0)
                fds.append(fd)
            }
            let waiting = fds
            let outcomes = Task {
                await withTaskGroup(of: Bool.self) { group in
                    for fd in waiting {
                        group.addTask {
                            do {
                                try await reactor.wait(for: fd, .readable)
                                return false
                            } catch {
                                return error is CancellationError
                            }
                        }
                    }
                    var cancelled = 0
                    for await wasCancelled in group where wasCancelled { cancelled += 1 }
                    return cancelled
                }
            }
            try await until("every wait parks", reactor.waitingDescriptorCounts()) { [count] in $0 >= count }
            let start = ContinuousClock.now
            outcomes.cancel()
            let cancelled = await outcomes.value
            let elapsed = ContinuousClock.now - start
            #expect(cancelled == count)
            #expect(reactor.waitingDescriptorCount == 0)
            #expect(elapsed < TimingBound.singleShot, "10,000 cancellations took \(elapsed)")
            for fd in fds { Syscall.close(fd) }
            // A leak of the 10,000 (or of one in five) would leave 10,000 (2,000) behind; the light suites that run
            // in parallel hold descriptors of their own at this instant (up to 91 in one CI run, more than the 64
            // this bound allowed before): far above that, far below a leak.
            #expect(
                DescriptorLedger.now().count < baseline + 2_000,
                "descriptors: baseline \(baseline), now \(DescriptorLedger.now().count)")
        }
    }

    /// 10,000 operations; each is completed by one thread while up to four others cancel it at a random
    /// point. Every waiter resumes exactly once (a double resume would trap), the outcome is either the value
    /// or `CancellationError`, and the hook runs exactly when it must: once for an operation that was started
    /// and then lost to a cancel, never for one that completed or was cancelled before it started.
    @Test func randomPointRaceFromFourThreads() async throws {
        /// What one operation did; checked once every canceller has finished (a hook may run on a canceller's
        /// thread just after the waiter resumed).
        final class Probe: Sendable {
            let hooks = Atomic<Int>(0)
            let started = Atomic<Bool>(false)
            let cancelled = Atomic<Bool>(false)
        }
        try await exclusively {
            let cancellers = Cancellers()
            let completer = DispatchQueue(label: "test.completer")
            var completed = 0
            var cancelled = 0
            var probes: [Probe] = []
            for i in 0..<10_000 {
                let cell = CancellationCell<Int>()
                let probe = Probe()
                probes.append(probe)
                let spins = Int.random(in: 0..<400)
                let cancelCount = [1, 2, 4][i % 3]
                if i % 7 == 0 { cell.cancel() }  // before start
                cancellers.fire(cancelCount, spins: spins) { cell.cancel() }
                do {
                    let value = try await cell.run(onCancel: { _ in probe.hooks.add(1, ordering: .relaxed) }) { cell in
                        probe.started.store(true, ordering: .relaxed)
                        completer.async {
                            cancellers.spin(Int.random(in: 0..<400))
                            cell.succeed(i)
                        }
                    }
                    #expect(value == i)
                    completed += 1
                } catch is CancellationError {
                    probe.cancelled.store(true, ordering: .relaxed)
                    cancelled += 1
                }
            }
            cancellers.drain()
            completer.sync {}
            var hooksRun = 0
            for probe in probes {
                let expected =
                    probe.cancelled.load(ordering: .relaxed) && probe.started.load(ordering: .relaxed) ? 1 : 0
                let hooks = probe.hooks.load(ordering: .relaxed)
                hooksRun += hooks
                if hooks != expected {
                    Issue.record("hook ran \(hooks) times, expected \(expected)")
                    break
                }
            }
            #expect(hooksRun > 0, "no operation was cancelled after its start: the race was not exercised")
            #expect(completed + cancelled == 10_000)
            #expect(cancelled >= 10_000 / 7)
        }
    }
}
