import Testing

@testable import ResourceKit

@Suite struct TimerHeapTests {
    @Test func popsInDeadlineOrderAndSkipsCancelled() {
        var heap = TimerHeap<Int>()
        let base = ContinuousClock.now
        _ = heap.schedule(at: base + .milliseconds(30), 3)
        let cancelled = heap.schedule(at: base + .milliseconds(10), 1)
        _ = heap.schedule(at: base + .milliseconds(20), 2)
        let firstCancel = heap.cancel(cancelled)
        let secondCancel = heap.cancel(cancelled)
        #expect(firstCancel)
        #expect(!secondCancel)
        let next = heap.nextDeadline()
        #expect(next == base + .milliseconds(20))
        let first = heap.popExpired(now: base + .milliseconds(25))
        #expect(first == [2])
        let second = heap.popExpired(now: base + .milliseconds(100))
        #expect(second == [3])
        #expect(heap.count == 0)
        let none = heap.nextDeadline()
        #expect(none == nil)
    }

    @Test func manyCancelledTimersAreCompacted() {
        var heap = TimerHeap<Int>()
        let base = ContinuousClock.now
        for i in 0..<10_000 {
            let id = heap.schedule(at: base + .seconds(Double(i % 97)), i)
            heap.cancel(id)
        }
        #expect(heap.count == 0)
        // Compaction keeps the stored entries within twice the live ones (plus its floor of 64): without it,
        // all 10,000 cancelled entries would still be stored.
        #expect(heap.storedCount <= 65, "\(heap.storedCount) entries stored for 0 live timers")
        let none = heap.nextDeadline()
        #expect(none == nil)
    }
}
