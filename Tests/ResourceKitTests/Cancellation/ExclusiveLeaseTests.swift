@_spi(Testing) import ResourceKit
import ResourceKitTesting
import TestSupport
import Testing

/// `ExclusiveLease` through real tasks: one holder at a time in arrival order, a parked wait ended by its task, its
/// resource or a deadline, and a release that races a cancel never losing the lease.
@Suite struct ExclusiveLeaseTests {
    static let kind = ResourceKind(name: "test.exclusive-lease")

    @Test func oneHolderAtATimeInArrivalOrder() async throws {
        let lease = ExclusiveLease()
        let registry = ResourceRegistry()
        try await withResourceScope("lease", registry: registry) { scope in
            let handle = try await scope.register(RecordingResource("r", log: CloseLog()), kind: Self.kind, label: "r")
            try await lease.acquire()
            #expect(lease.isHeld && !lease.tryAcquire())
            let order = Locked<[Int]>([])
            var waiters: [Task<Void, any Error>] = []
            for index in 0..<3 {
                // Bound to the handle, so that the registry counts each parked wait: they park in this order.
                waiters.append(
                    Task {
                        try await lease.acquire(boundTo: handle)
                        order.withLock { $0.append(index) }
                        lease.release()
                    })
                try await until("waiter \(index) parks", registry.operationCountUpdates()) { $0 >= index + 1 }
            }
            lease.release()
            for waiter in waiters { try await waiter.value }
            #expect(order.withLock { $0 } == [0, 1, 2])
            #expect(!lease.isHeld)
        }
    }

    @Test func aCancelledWaitDoesNotHoldTheLeaseAndTheNextGetsIt() async throws {
        let lease = ExclusiveLease()
        let registry = ResourceRegistry()
        try await withResourceScope("lease", registry: registry) { scope in
            let handle = try await scope.register(RecordingResource("r", log: CloseLog()), kind: Self.kind, label: "r")
            try await lease.acquire()
            let first = Task { try await lease.acquire(boundTo: handle) }
            try await until("the first waiter parks", registry.operationCountUpdates()) { $0 >= 1 }
            let second = Task { try await lease.acquire(deadline: .now + .seconds(30)) }
            first.cancel()
            await #expect(throws: CancellationError.self) { try await first.value }
            lease.release()
            try await second.value  // the cancelled waiter was skipped
            #expect(lease.isHeld)
            lease.release()
            #expect(!lease.isHeld)
        }
    }

    @Test func theBoundResourcesCancelAndADeadlineEndAParkedWait() async throws {
        let lease = ExclusiveLease()
        try await lease.acquire()
        await #expect(throws: DeadlineExceededError.self) { try await lease.acquire(deadline: .now + .milliseconds(5)) }
        let registry = ResourceRegistry()
        try await withResourceScope("lease", registry: registry) { scope in
            let handle = try await scope.register(RecordingResource("r", log: CloseLog()), kind: Self.kind, label: "r")
            let waiter = Task { try await lease.acquire(boundTo: handle) }
            try await until("the wait parks", registry.operationCountUpdates()) { $0 >= 1 }
            handle.cancel()
            await #expect(throws: CancellationError.self) { try await waiter.value }
        }
        lease.release()
        #expect(!lease.isHeld)
    }

    /// Releases racing cancels of the waiters they hand the lease to: whoever wins, the lease ends with exactly one
    /// holder or none, never held by a waiter that threw.
    @Test func aReleaseRacingACancelNeverLosesTheLease() async throws {
        let lease = ExclusiveLease()
        for _ in 0..<2_000 {
            try await lease.acquire()
            let waiter = Task { try await lease.acquire() }
            await Task.yield()
            let canceller = Task { waiter.cancel() }
            lease.release()
            await canceller.value
            if (try? await waiter.value) != nil {
                #expect(lease.isHeld)
                lease.release()
            }
            #expect(!lease.isHeld, "the lease stayed held after every holder released it")
        }
    }
}
