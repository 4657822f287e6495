import Dispatch
import Synchronization
import TestSupport
import Testing

@testable import ResourceKit

/// The cell through real threads.
@Suite struct CancellationCellTests {
    /// The suite runs the synchronisation that ships (an unsafe continuation per wait); only a sanitizer pass, which
    /// `Scripts/test --sanitize=...` builds with `RESOURCEKIT_CHECKED_SYNCHRONIZATION`, runs the checked one.
    @Test func theSuiteRunsTheSynchronisationThatShips() {
        #if RESOURCEKIT_CHECKED_SYNCHRONIZATION
        #expect(WaiterContinuation<Int>.self == CheckedContinuation<Int, any Error>.self)
        #else
        #expect(WaiterContinuation<Int>.self == UnsafeContinuation<Int, any Error>.self)
        #endif
    }

    /// A callback that fires before `run` (a library that answers at once) delivers its result: `run` returns it
    /// and never calls `start` (it used to trap with "suspend called twice").
    @Test func aResultDeliveredBeforeRunIsReturnedByRun() async throws {
        let cell = CancellationCell<Int>()
        #expect(cell.succeed(7))
        #expect(!cell.succeed(8))  // a second result loses
        let started = Atomic<Bool>(false)
        let value = try await cell.run { _ in started.store(true, ordering: .relaxed) }
        #expect(value == 7)
        let didStart = started.load(ordering: .relaxed)
        #expect(!didStart)
    }

    @Test func cancelBeforeRunNeverStarts() async {
        let cell = CancellationCell<Int>()
        cell.cancel()
        let started = Atomic<Bool>(false)
        await #expect(throws: CancellationError.self) {
            try await cell.run { _ in started.store(true, ordering: .relaxed) }
        }
        let didStart = started.load(ordering: .relaxed)
        #expect(!didStart)
    }

    /// When a cancelled wait throws, its hook has already run: a caller never sees a half-cancelled operation
    /// (a pool's waiter still queued, a reactor registration still present). One wait can be reached by several
    /// routes; each is checked here, many rounds each, always after the start ran: the task's cancellation
    /// handler, the timers' thread (as a deadline fires), a direct cancel, and the handle the wait is bound to.
    @Test func theHookHasRunWhenTheCancelledWaitThrows() async throws {
        let registry = ResourceRegistry()
        let kind = ResourceKind(name: "test.hook-order")
        for round in 0..<400 {
            let route = round % 4
            let sawHook = try await withResourceScope("hook-order", registry: registry) { scope in
                let handle = try await scope.register(RecordingResource("r", log: CloseLog()), kind: kind, label: "r")
                let cell = CancellationCell<Int>()
                let hookRan = Atomic<Bool>(false)
                let parked = OneShotEvent()
                let task = Task {
                    do {
                        _ = try await cell.run(
                            boundTo: handle,
                            onCancel: { _ in
                                // A slow hook widens the window in which a resumed waiter would see it unfinished.
                                for _ in 0..<2_000 { _ = hookRan.load(ordering: .relaxed) }
                                hookRan.store(true, ordering: .sequentiallyConsistent)
                            }
                        ) { _ in parked.set() }
                        return false
                    } catch {
                        return hookRan.load(ordering: .sequentiallyConsistent)
                    }
                }
                try await parked.wait(deadline: .now + .seconds(10))
                switch route {
                case 0: task.cancel()
                case 1:
                    let now = ContinuousClock.now
                    DeadlineTimers.shared.schedule(at: now) { cell.cancel(.deadlineExceeded(now)) }
                case 2: cell.cancel()
                default: handle.cancel()
                }
                return await task.value
            }
            #expect(sawHook, "round \(round), route \(route): the wait threw before its hook ran")
            if !sawHook { return }
        }
        #expect(registry.liveCount == 0)
    }

    /// `afterCancel` runs once, after `onCancel`, inside the cancelling call, on each path where a cancel wins
    /// against a started operation (while parked; while `start` runs), and never where none does (completed;
    /// cancelled before `run`).
    @Test func afterCancelRunsOnceAfterTheHookInsideTheCancel() async throws {
        // Cancelled while parked: both have run when `cancel()` returns.
        do {
            let cell = CancellationCell<Int>()
            let log = Locked<[String]>([])
            let parked = OneShotEvent()
            let task = Task {
                try await cell.run(
                    onCancel: { _ in log.withLock { $0.append("hook") } },
                    afterCancel: { _ in log.withLock { $0.append("after") } }
                ) { _ in parked.set() }
            }
            try await parked.wait(deadline: .now + .seconds(10))
            cell.cancel()
            #expect(log.withLock { $0 } == ["hook", "after"])
            await #expect(throws: CancellationError.self) { try await task.value }
            cell.cancel()
            #expect(log.withLock { $0 } == ["hook", "after"])
        }
        // Cancelled while `start` runs: both run when `start` returns.
        do {
            let cell = CancellationCell<Int>()
            let log = Locked<[String]>([])
            await #expect(throws: CancellationError.self) {
                try await cell.run(
                    onCancel: { _ in log.withLock { $0.append("hook") } },
                    afterCancel: { _ in log.withLock { $0.append("after") } }
                ) { cell in cell.cancel() }
            }
            #expect(log.withLock { $0 } == ["hook", "after"])
        }
        // Completed, or cancelled before `run`: neither runs.
        for cancelFirst in [false, true] {
            let cell = CancellationCell<Int>()
            let log = Locked<[String]>([])
            if cancelFirst { cell.cancel() }
            _ = try? await cell.run(
                onCancel: { _ in log.withLock { $0.append("hook") } },
                afterCancel: { _ in log.withLock { $0.append("after") } }
            ) { cell in cell.succeed(1) }
            cell.cancel()
            #expect(log.withLock { $0 }.isEmpty)
        }
    }

    /// Cancelled while parked (after its start closure ran): the hook runs exactly once, and a completion
    /// that comes after the cancel is dropped.
    @Test func completionAfterCancelIsDropped() async throws {
        let cell = CancellationCell<Int>()
        let hookRuns = Atomic<Int>(0)
        let parked = OneShotEvent()
        let task = Task {
            try await cell.run(onCancel: { _ in hookRuns.add(1, ordering: .relaxed) }) { _ in parked.set() }
        }
        try await parked.wait(deadline: .now + .seconds(10))
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(!cell.succeed(42))
        let hooks = hookRuns.load(ordering: .relaxed)
        #expect(hooks == 1, "the hook of an operation cancelled while running must run once")
    }

    @Test func completeFromAnotherThreadReturnsValue() async throws {
        let cell = CancellationCell<Int>()
        let value = try await cell.run { cell in
            DispatchQueue.global().async { cell.succeed(7) }
        }
        #expect(value == 7)
        cell.cancel()
        #expect(!cell.isCancelled)
    }

    @Test func alreadyCancelledTaskThrowsWithoutStarting() async {
        let started = Atomic<Bool>(false)
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            let cell = CancellationCell<Void>()
            try await cell.run { _ in started.store(true, ordering: .relaxed) }
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        let didStart = started.load(ordering: .relaxed)
        #expect(!didStart)
    }

    @Test func deadlineSurfacesAsItsOwnError() async {
        let cell = CancellationCell<Void>()
        await #expect(throws: DeadlineExceededError.self) {
            try await cell.run(deadline: .now + .milliseconds(20)) { _ in }
        }
        if case .deadlineExceeded = cell.cancellationReason {
        } else {
            Issue.record("reason should be the deadline")
        }
    }
}
