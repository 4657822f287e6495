import ResourceKitTesting
import TestSupport
import Testing

@testable import ResourceKit
@testable import ResourceKitPatterns

/// Latest-wins keyed work through real pipes: each run registers a pipe in its scope and blocks reading it.
@Suite struct LatestTaskTests {
    /// Pipes opened by the runs, by id.
    final class Pipes: Sendable {
        private let pipes = ObservedValue<[String: PipeResource]>([:])
        func add(_ id: String, _ pipe: PipeResource) { pipes.update { $0[id] = pipe } }
        subscript(id: String) -> PipeResource? { pipes.value[id] }
        var count: Int { pipes.value.count }
        /// Waits until run `id` opened its pipe (an event: the work publishes it).
        func opened(_ id: String) async throws {
            try await until("run \(id) opened its pipe", pipes.values()) { $0[id] != nil }
        }
    }

    static func blockingRun(_ pipes: Pipes) -> LatestTask<String, String>.Work {
        { id, scope in
            let pipe = try PipeResource()
            let handle = try await scope.register(pipe, kind: PipeResource.kind, label: "pipe")
            pipes.add(id, pipe)
            _ = try await pipe.readByte(boundTo: handle)
            return id
        }
    }

    @Test func newIdCancelsRunningWorkAndTearsItsResourcesDown() async throws {
        let registry = ResourceRegistry()
        let pipes = Pipes()
        try await withResourceScope("connection", registry: registry) { scope in
            let latest = try await LatestTask.start(in: scope, "search", work: Self.blockingRun(pipes))
            #expect(latest.update(id: "a") == .started(generation: 1))
            try await pipes.opened("a")
            #expect(latest.update(id: "a") == .unchanged, "the same id does not restart")

            #expect(latest.update(id: "b") == .started(generation: 2))
            try await #require(pipes["a"]).closed.wait(deadline: .now + .seconds(10))
            #expect(pipes["a"]?.closeCount.load(ordering: .relaxed) == 1)
            #expect(pipes["a"]?.cancelCount.load(ordering: .relaxed) == 1)
            try await pipes.opened("b")

            let updates = latest.output.updates()
            pipes["b"]?.writeByte()
            var iterator = updates.makeAsyncIterator()
            #expect(await iterator.next()?.value == "b")
            #expect(latest.output.value == "b")
            #expect(latest.stats.cancelled == 1 && latest.stats.committed == 1)
        }
        #expect(registry.liveCount == 0)
        #expect(pipes["b"]?.closeCount.load(ordering: .relaxed) == 1)
    }

    /// 20 ids in 200 ms with a 300 ms debounce: the work runs once, for the last id. The gaps are measured: a loop
    /// that the scheduler stalled for most of a debounce (the thread sanitizer's first pass, a loaded machine) let
    /// the id before the stall run too, as a debounce should; any other id that runs fails the test.
    @Test func debouncedBurstReachesTheResourceOnce() async throws {
        let executions = Locked<[Int]>([])
        let registry = ResourceRegistry()
        // Timing is the subject (10 ms gaps against a 300 ms debounce): hold the gate.
        try await exclusively {
            try await withResourceScope("connection", registry: registry) { scope in
                let latest = try await LatestTask.start(in: scope, "burst", debounce: .milliseconds(300)) { id, _ in
                    executions.withLock { $0.append(id) }
                    return id
                }
                let updates = latest.output.updates()
                var sentAt: [ContinuousClock.Instant] = []
                for id in 1...20 {
                    sentAt.append(.now)
                    latest.update(id: id)
                    try await Task.sleep(for: .milliseconds(10))
                }
                var iterator = updates.makeAsyncIterator()
                #expect(await iterator.next()?.value == 20)
                // Id k may run only if id k + 1 came at least 250 ms after it (50 ms short of the debounce, for the
                // distance between this loop's clock reads and the debounce's own timer).
                let stalled = Set((1..<20).filter { sentAt[$0] - sentAt[$0 - 1] >= .milliseconds(250) })
                let executed = executions.withLock { $0 }
                #expect(executed.last == 20)
                #expect(Set(executed.dropLast()).isSubset(of: stalled), "ran \(executed), stalled after \(stalled)")
                #expect(latest.stats.debouncedAway == 20 - executed.count)
            }
        }
    }

    /// Work that ignores cancellation (a callback API that answers late) returns after a newer run
    /// committed: its result is dropped, the newer one stays.
    @Test func slowSupersededResultNeverOverwritesANewerOne() async throws {
        let lateAnswers = ObservedValue<[String: CheckedContinuation<String, Never>]>([:])
        try await withResourceScope("connection", registry: ResourceRegistry()) { scope in
            let latest = try await LatestTask<String, String>.start(in: scope, "legacy") { id, _ in
                // A legacy callback API bridged without cancellation support.
                await withCheckedContinuation { continuation in
                    lateAnswers.update { $0[id] = continuation }
                }
            }
            latest.update(id: "old")
            try await until("old asked", lateAnswers.values()) { $0["old"] != nil }
            latest.update(id: "new")
            try await until("new asked", lateAnswers.values()) { $0["new"] != nil }

            let updates = latest.output.updates()
            lateAnswers.update { $0.removeValue(forKey: "new") }?.resume(returning: "new result")
            var iterator = updates.makeAsyncIterator()
            #expect(await iterator.next()?.value == "new result")

            lateAnswers.update { $0.removeValue(forKey: "old") }?.resume(returning: "old result")
            try await latest.idle()
            #expect(latest.runningCount == 0)
            #expect(latest.output.value == "new result")
            #expect(latest.stats.droppedStale == 1)
        }
    }

    /// The transient-branch pitfall: a latest task bound to a scope that ends early dies with it. Bound to
    /// the longer-lived scope, it keeps serving after the short one ended.
    @Test func boundToAShortScopeItDiesWithItBoundToTheOwnerItLives() async throws {
        let registry = ResourceRegistry()
        let pipes = Pipes()
        try await withResourceScope("connection", registry: registry) { connection in
            // Pitfall: started inside the request's scope.
            let wronglyBound = try await withResourceScope("request") { request in
                let latest = try await LatestTask.start(in: request, "search", work: Self.blockingRun(pipes))
                latest.update(id: "x")
                try await pipes.opened("x")
                return latest
            }
            #expect(
                pipes["x"]?.closeCount.load(ordering: .relaxed) == 1, "its work was cancelled when the request ended")
            #expect(wronglyBound.update(id: "y") == .refusedClosed)

            // Fix: bind it to the connection's scope, use it from the request.
            let rightlyBound = try await LatestTask.start(in: connection, "search", work: Self.blockingRun(pipes))
            try await withResourceScope("request") { _ in
                rightlyBound.update(id: "z")
                try await pipes.opened("z")
            }
            #expect(pipes["z"]?.closeCount.load(ordering: .relaxed) == 0, "still running after the request ended")
            #expect(rightlyBound.update(id: "w") == .started(generation: 2))
        }
        #expect(registry.liveCount == 0)
    }

    /// Using the output as the id: from inside the work it is refused; from an observer it is a restart loop
    /// that keeps running with no outside input, which this test shows (and the documentation warns about).
    @Test func outputAsIdIsARestartLoop() async throws {
        try await withResourceScope("connection", registry: ResourceRegistry()) { scope in
            let refusals = Locked<[LatestTask<Int, Int>.UpdateResult]>([])
            let selfFeeding = Locked<LatestTask<Int, Int>?>(nil)
            let direct = try await LatestTask<Int, Int>.start(in: scope, "direct") { id, _ in
                if let me = selfFeeding.withLock({ $0 }) { refusals.withLock { $0.append(me.update(id: id + 1)) } }
                return id + 1
            }
            selfFeeding.withLock { $0 = direct }
            let directUpdates = direct.output.updates()
            direct.update(id: 1)
            try await until("direct committed", directUpdates) { $0.value == 2 }
            #expect(refusals.withLock { $0 } == [.refusedFeedbackLoop])
            #expect(direct.stats.started == 1 && direct.stats.feedbackLoops == 1)

            // The indirect loop: an observer feeds each committed output back as the next id.
            let looping = try await LatestTask<Int, Int>.start(in: scope, "looping") { id, _ in id + 1 }
            // Subscribed before the first update, so that its commit cannot come before the observer listens.
            let updates = looping.output.updates()
            let observer = Task {
                for await committed in updates { looping.update(id: committed.value) }
            }
            let watched = looping.output.updates()
            looping.update(id: 1)
            // Generation g commits only after the g-th start: 20 generations, 20 restarts with no outside input.
            try await until("the loop restarted 20 times by itself", watched) { $0.generation >= 20 }
            #expect(looping.stats.started >= 20)
            observer.cancel()
            looping.cancel()
        }
    }
}
