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
        let registry = ResourceRegistry()
        let log = Locked<[String]>([])
        let readStarted = Atomic<Bool>(false)
        // Far enough that the read is parked before it passes, even when the whole suite starts at once
        // under the thread sanitizer (setup alone then takes over a second).
        let deadline = ContinuousClock.now + .seconds(2)
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
        // CancellationError, which fails the expectation below). No time bound is asserted: the error's type
        // tells the deadline from the watchdog.
        let watchdog = Task {
            try await Task.sleep(for: .seconds(10))
            request.cancel()
        }
        defer { watchdog.cancel() }
        await #expect(throws: DeadlineExceededError.self) { try await request.value }
        let reachedTheRead = readStarted.load(ordering: .relaxed)
        #expect(reachedTheRead, "the deadline passed before the part's read started")
        #expect(registry.liveCount == 0)
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
