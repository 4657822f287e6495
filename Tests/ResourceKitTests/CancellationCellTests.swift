import Dispatch
import Synchronization
import Testing

@testable import ResourceKit

/// The cell through real threads.
@Suite struct CancellationCellTests {
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
