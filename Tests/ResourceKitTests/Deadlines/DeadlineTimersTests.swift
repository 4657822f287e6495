@testable import ResourceKit
import Testing

/// The core's deadline timers (`rk.timers`): every scope, operation and wait deadline fires from here.
@Suite struct DeadlineTimersTests {
    @Test func timersFireInOrderAndAnEarlierOneWakesTheThread() async throws {
        // Both timers must be scheduled before the earlier one is due; on a loaded machine the test's thread can
        // be held up between the two calls, and then the order says nothing: that attempt is repeated.
        for _ in 0..<5 {
            let order = Locked<[Int]>([])
            let cell = CancellationCell<Void>()
            let base = ContinuousClock.now
            DeadlineTimers.shared.schedule(at: base + .milliseconds(200)) { order.withLock { $0.append(2) } }
            DeadlineTimers.shared.schedule(at: base + .milliseconds(50)) { order.withLock { $0.append(1) } }
            let cancelledTimer = DeadlineTimers.shared.schedule(at: base + .milliseconds(100)) {
                order.withLock { $0.append(99) }
            }
            DeadlineTimers.shared.cancel(cancelledTimer)
            let scheduledInTime = ContinuousClock.now < base + .milliseconds(50)
            DeadlineTimers.shared.schedule(at: base + .milliseconds(300)) { cell.succeed(()) }
            try await cell.run { _ in }
            guard scheduledInTime else { continue }
            #expect(order.withLock { $0 } == [1, 2])
            return
        }
        Issue.record("the test's thread never scheduled both timers before the first was due (5 attempts)")
    }
}
