import Testing

@testable import ResourceKit

/// ``IdentityTable`` as a pure value: the inline first member and the dictionary behind it never hold one id
/// twice, and nothing tracked is lost.
@Suite struct IdentityTableTests {
    let a = ObjectIdentifier(Int.self)
    let b = ObjectIdentifier(String.self)
    let c = ObjectIdentifier(Double.self)

    @Test func oneWaiterIsTrackedReplacedAndForgotten() {
        var waiters = IdentityTable<Int>()
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
        var waiters = IdentityTable<Int>()
        waiters.insert(1, id: a)
        waiters.insert(2, id: b)
        waiters.insert(3, id: c)
        #expect(waiters.all.sorted() == [1, 2, 3])
        waiters.remove(id: b)
        #expect(waiters.all.sorted() == [1, 3])
    }

    @Test func anIdHeldBehindTheFirstIsNeverTrackedTwice() {
        var waiters = IdentityTable<Int>()
        waiters.insert(1, id: a)
        waiters.insert(2, id: b)  // behind the first
        waiters.remove(id: a)  // the inline place is free, b is still behind it
        waiters.insert(3, id: b)  // replaces b where it is
        #expect(waiters.count == 1)
        #expect(waiters.all == [3])
        waiters.remove(id: b)
        #expect(waiters.count == 0)
    }

    @Test func insertAndRemoveSayWhetherTheyChangedTheMembers() {
        var table = IdentityTable<Int>()
        #expect(table.isEmpty)
        var changes: [Bool] = []
        changes.append(table.insert(1, id: a))
        changes.append(table.insert(10, id: a))  // replaced inline
        changes.append(table.insert(2, id: b))
        changes.append(table.insert(20, id: b))  // replaced behind the first
        #expect(changes == [true, false, true, false])
        #expect(!table.isEmpty)
        var seen: [Int] = []
        table.forEach { seen.append($0) }
        #expect(seen.sorted() == [10, 20])
        changes = [table.remove(id: a), table.remove(id: a), table.remove(id: c), table.remove(id: b)]
        #expect(changes == [true, false, false, true])
        #expect(table.isEmpty)
        seen = []
        table.forEach { seen.append($0) }
        #expect(seen.isEmpty)
    }
}
