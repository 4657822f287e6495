import Testing

@testable import ResourceKit

/// The waiter queue as a pure value: its three promises (an id before the ask, a cancel before the ask kept, every
/// waiter handed out once), then through real tasks in `OneShotEventTests` and the Postgres pool's suites.
@Suite struct WaiterQueueTests {
    typealias Queue = WaiterQueue<String>

    @Test func waitersLeaveInArrivalOrder() {
        var queue = Queue()
        queue.append("a", id: 1)
        queue.append("b", id: 2)
        queue.append("c", id: 3)
        #expect(queue.waiters == ["a", "b", "c"])
        #expect(queue.popFirst() == "a")
        #expect(queue.popFirst(5) == ["b", "c"])
        #expect(queue.popFirst() == nil)
        #expect(queue.popFirst(2) == [])
        #expect(queue.isEmpty)
    }

    @Test func workThatGoesBackGoesToTheFrontInItsOrder() {
        var queue = Queue()
        queue.append("c", id: 3)
        queue.prepend([(1, "a"), (2, "b")])
        #expect(queue.waiters == ["a", "b", "c"])
        // An id put back is cancellable as any other.
        guard case .removed("b") = queue.cancel(2, reason: .cancelled, asked: true) else {
            Issue.record("expected b removed")
            return
        }
        #expect(queue.waiters == ["a", "c"])
    }

    @Test func aCancelBeforeTheAskIsKeptForTheAskAndOnlyTheFirstReasonCounts() {
        var queue = Queue()
        guard case .remembered = queue.cancel(7, reason: .cancelled, asked: false) else {
            Issue.record("expected remembered")
            return
        }
        _ = queue.cancel(7, reason: .deadlineExceeded(.now), asked: false)
        #expect(queue.remembered == 1)
        #expect(queue.takeCancellation(of: 8) == nil, "another waiter's ask finds nothing")
        #expect(queue.takeCancellation(of: 7) == .cancelled)
        #expect(queue.takeCancellation(of: 7) == nil, "found once, then forgotten")
        #expect(queue.remembered == 0)
        #expect(queue.isEmpty, "a waiter cancelled before it asked never parks")
    }

    @Test func aParkedWaiterIsHandedOutOnceWhateverComesFirst() {
        var queue = Queue()
        queue.append("a", id: 1)
        queue.append("b", id: 2)
        // Handed out first, then cancelled: the cancel changes nothing.
        #expect(queue.popFirst() == "a")
        guard case .notParked = queue.cancel(1, reason: .cancelled, asked: true) else {
            Issue.record("expected notParked")
            return
        }
        // Cancelled first, then the queue is emptied: it is not handed out again.
        guard case .removed("b") = queue.cancel(2, reason: .cancelled, asked: true) else {
            Issue.record("expected b removed")
            return
        }
        #expect(queue.removeAll() == [])
        #expect(queue.remembered == 0, "a cancel of a waiter that asked is never kept")
    }

    @Test func removeAllHandsEveryWaiterOutOnce() {
        var queue = Queue()
        for (id, name) in ["a", "b", "c"].enumerated() { queue.append(name, id: UInt64(id)) }
        #expect(queue.removeAll() == ["a", "b", "c"])
        #expect(queue.removeAll() == [])
        #expect(queue.count == 0)
    }
}
