import Glibc
import ResourceKit
import ResourceKitTesting
import Synchronization
import TestSupport
import Testing

/// ``ResourceHandle/parts``: a resource built on others cancels and closes them with itself, and the reason
/// (a deadline) reaches them.
@Suite struct HandlePartsTests {
    /// An outer resource that records the order of events it sees.
    final class Outer: ManagedResource {
        static let kind = ResourceKind(name: "test.outer", closeTimeout: .seconds(2))
        let log: Locked<[String]>
        init(log: Locked<[String]>) { self.log = log }
        func cancel() { log.withLock { $0.append("outer.cancel") } }
        func close() async throws { log.withLock { $0.append("outer.close") } }
    }

    @Test func aDeadlineReachesAPartsWaitAsDeadlineExceeded() async throws {
        // The deadline must pass while the part's read is parked. Under load (the whole suite starting at once,
        // the thread sanitizer, two busy cores) the setup alone can outlast a short deadline: then the attempt
        // says so and the next one gives the setup more time. An attempt whose read started must end with the
        // deadline's error.
        for seconds in [2, 8, 30] {
            let (outcome, reachedTheRead, live) = try await Self.partsWaitUnderDeadline(.seconds(seconds))
            #expect(live == 0)
            guard reachedTheRead else { continue }
            let seen = outcome.map { "\($0)" } ?? "no error"
            #expect(outcome is DeadlineExceededError, "the part's read ended with \(seen)")
            return
        }
        Issue.record("the deadline passed before the part's read started, three times (2 s, 8 s, 30 s)")
    }

    /// One attempt: a part's read parked under a scope deadline `after` from now. Returns the request's error,
    /// whether the read started, and the registry's live count afterwards.
    static func partsWaitUnderDeadline(_ after: Duration) async throws -> ((any Error)?, Bool, Int) {
        let registry = ResourceRegistry()
        let log = Locked<[String]>([])
        let readStarted = Atomic<Bool>(false)
        let deadline = ContinuousClock.now + after
        let request = Task {
            try await withResourceScope("request", deadline: deadline, registry: registry) { scope in
                let outer = Outer(log: log)
                let handle = try await scope.register(outer, kind: Outer.kind, label: "client")
                let part = try PipeResource()
                let partHandle = try await handle.parts.register(part, kind: PipeResource.kind, label: "data")
                #expect(handle.parts.path == "request/client")
                readStarted.store(true, ordering: .relaxed)
                _ = try await part.readByte(boundTo: partHandle)
            }
        }
        // If the deadline never reached the part, the read would block for ever: a watchdog ends it (with
        // CancellationError, which fails the caller's expectation). No time bound is asserted: the error's type
        // tells the deadline from the watchdog.
        let watchdog = Task {
            try await Task.sleep(for: after + .seconds(10))
            request.cancel()
        }
        defer { watchdog.cancel() }
        var outcome: (any Error)?
        do {
            try await request.value
        } catch {
            outcome = error
        }
        return (outcome, readStarted.load(ordering: .relaxed), registry.liveCount)
    }

    @Test func cancelRunsTheOuterFirstThenThePartsAndCloseClosesThemAfterTheOuter() async throws {
        let registry = ResourceRegistry()
        let log = Locked<[String]>([])
        let part = try PipeResource()
        try await withResourceScope("request", registry: registry) { scope in
            let outer = Outer(log: log)
            let handle = try await scope.register(outer, kind: Outer.kind, label: "client")
            let partHandle = try await handle.parts.register(part, kind: PipeResource.kind, label: "data")
            handle.cancel()
            #expect(log.withLock { $0 } == ["outer.cancel"])
            #expect(part.cancelCount.load(ordering: .relaxed) == 1)
            #expect(partHandle.cancellationReason == .cancelled)
            #expect(part.closeCount.load(ordering: .relaxed) == 0)
        }
        #expect(log.withLock { $0 } == ["outer.cancel", "outer.close"])
        #expect(part.closeCount.load(ordering: .relaxed) == 1)
        #expect(registry.liveCount == 0)
    }

    @Test func registeringAPartAfterTheCloseIsRefusedAndClosesIt() async throws {
        let registry = ResourceRegistry()
        let log = Locked<[String]>([])
        var kept: ResourceHandle?
        try await withResourceScope("request", registry: registry) { scope in
            kept = try await scope.register(Outer(log: log), kind: Outer.kind, label: "client")
        }
        let late = try PipeResource()
        await #expect(throws: CancellationError.self) {
            try await kept?.parts.register(late, kind: PipeResource.kind, label: "late")
        }
        #expect(late.closeCount.load(ordering: .relaxed) == 1)
        #expect(registry.liveCount == 0)
    }
}
