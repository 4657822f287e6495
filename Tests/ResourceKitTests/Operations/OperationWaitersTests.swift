import Testing

@testable import ResourceKit

/// ``OperationWaiters`` as a pure value: the inline first waiter and the dictionary behind it never hold one id
/// twice, and nothing tracked is lost.
@Suite struct OperationWaitersTests {
    let a = ObjectIdentifier(Int.self)
    let b = ObjectIdentifier(String.self)
    let c = ObjectIdentifier(Double.self)

    @Test func oneWaiterIsTrackedReplacedAndForgotten() {
        var waiters = OperationWaiters<Int>()
        waiters.insert(1, id: a)
        waiters.insert(2, id: a)
        #expect(waiters.count == 1)
        #expect(waiters.all == [2])
        waiters.remove(id: b)
        #expect(waiters.count == 1)
        waiters.remove(id: a)
        #expect(waiters.count == 0)
        #expect(waiters.all.isEmpty)
    }

    @Test func moreThanOneWaiterAreAllTracked() {
        var waiters = OperationWaiters<Int>()
        waiters.insert(1, id: a)
        waiters.insert(2, id: b)
        waiters.insert(3, id: c)
        #expect(waiters.all.sorted() == [1, 2, 3])
        waiters.remove(id: b)
        #expect(waiters.all.sorted() == [1, 3])
    }

    @Test func anIdHeldBehindTheFirstIsNeverTrackedTwice() {
        var waiters = OperationWaiters<Int>()
        waiters.insert(1, id: a)
        waiters.insert(2, id: b)  // behind the first
        waiters.remove(id: a)  // the inline place is free, b is still behind it
        waiters.insert(3, id: b)  // replaces b where it is
        #expect(waiters.count == 1)
        #expect(waiters.all == [3])
        waiters.remove(id: b)
        #expect(waiters.count == 0)
    }
}
