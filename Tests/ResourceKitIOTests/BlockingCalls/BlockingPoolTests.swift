import Foundation
import Glibc
import Synchronization
import ResourceKitTesting
import TestSupport
import Testing

@testable import ResourceKit
@_spi(Testing) @testable import ResourceKitIO

@Suite struct BlockingPoolTests {
    @Test func runsOnItsOwnThreads() async throws {
        let pool = BlockingPool(threadCount: 2, name: "tpool")
        defer { pool.shutdown() }
        let name = try await pool.run { Thread.current.name ?? "" }
        #expect(name.hasPrefix("tpool."))
    }

    /// A queued job that is cancelled never runs; a running job's caller resumes at once and its hook runs.
    @Test func queuedJobIsDroppedAndRunningJobResumesAtOnce() async throws {
        try await exclusively {
            let pool = BlockingPool(threadCount: 1, name: "test.pool.cancel")
            defer { pool.shutdown() }
            let gate = try PipeResource()
            defer {
                Syscall.close(gate.readFD)
                Syscall.close(gate.writeFD)
            }
            let blockerStarted = OneShotEvent()
            let hookRan = Atomic<Bool>(false)
            let readFD = gate.readFD
            // Occupies the only thread with a truly blocking call until the hook opens the gate.
            let blocker = Task {
                try await pool.run(onCancel: { _ in
                    hookRan.store(true, ordering: .relaxed)
                    gate.writeByte()
                }) {
                    blockerStarted.set()
                    var pfd = pollfd(fd: readFD, events: Int16(POLLIN), revents: 0)
                    _ = poll(&pfd, 1, 10_000)
                }
            }
            try await blockerStarted.wait(deadline: .now + .seconds(10))
            let queuedRan = Atomic<Bool>(false)
            let queued = Task { try await pool.run { queuedRan.store(true, ordering: .relaxed) } }
            try await until("a job is queued", pool.queuedCountUpdates()) { $0 > 0 }
            queued.cancel()
            await #expect(throws: CancellationError.self) { try await queued.value }
            let cancelled = ContinuousClock.now
            blocker.cancel()
            await #expect(throws: CancellationError.self) { try await blocker.value }
            #expect(ContinuousClock.now - cancelled < TimingBound.singleShot)
            let hook = hookRan.load(ordering: .relaxed)
            #expect(hook)
            // Drain: a later job runs, proving the dropped one was skipped rather than run.
            try await pool.run {}
            let ran = queuedRan.load(ordering: .relaxed)
            #expect(!ran)
        }
    }

    @Test func fullQueueAndShutdownGiveTypedErrors() async throws {
        let pool = BlockingPool(threadCount: 1, queueLimit: 1, name: "test.pool.full")
        let gate = try PipeResource()
        defer {
            Syscall.close(gate.readFD)
            Syscall.close(gate.writeFD)
        }
        let readFD = gate.readFD
        let started = OneShotEvent()
        let blocker = Task {
            try await pool.run {
                started.set()
                var pfd = pollfd(fd: readFD, events: Int16(POLLIN), revents: 0)
                _ = poll(&pfd, 1, 10_000)
            }
        }
        try await started.wait(deadline: .now + .seconds(10))
        let queued = Task { try await pool.run {} }
        try await until("a job is queued", pool.queuedCountUpdates()) { $0 > 0 }
        await #expect { try await pool.run {} } throws: { ($0 as? ResourceKitError)?.code == .blockingPoolFull }
        gate.writeByte()
        try await blocker.value
        try await queued.value
        pool.shutdown()
        await #expect { try await pool.run {} } throws: { ($0 as? ResourceKitError)?.code == .blockingPoolShutDown }
    }

    @Test func jobBoundToCancelledHandleNeverRuns() async throws {
        let registry = ResourceRegistry()
        let log = CloseLog()
        let ran = Atomic<Bool>(false)
        try await withResourceScope("pool", registry: registry) { scope in
            let handle = try await scope.register(
                RecordingResource("r", log: log), kind: ResourceKind(name: "test.r"), label: "r")
            handle.cancel()
            await #expect(throws: CancellationError.self) {
                try await BlockingPool.shared.run(boundTo: handle) { ran.store(true, ordering: .relaxed) }
            }
        }
        let didRun = ran.load(ordering: .relaxed)
        #expect(!didRun)
    }
}
