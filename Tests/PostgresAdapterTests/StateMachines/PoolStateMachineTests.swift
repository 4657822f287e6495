import Testing

import ResourceKit

@testable import PostgresAdapter

/// The pool's decisions as a pure value: no server, no I/O.
@Suite struct PoolStateMachineTests {
    final class Connection {}
    typealias Machine = PoolStateMachine<Connection, String, String, Int>

    /// A pool of one: lease 1 ("a") opened the slot, lease 2 ("b") is queued behind it.
    static func aLeasedAndBQueued() -> Machine {
        var machine = Machine(capacity: 1)
        _ = machine.lease(id: 1, waiter: "a")
        _ = machine.lease(id: 2, waiter: "b")
        return machine
    }

    @Test func opensUpToCapacityThenParks() {
        var machine = Machine(capacity: 2)
        guard case .open = machine.lease(id: 1, waiter: "a"), case .open = machine.lease(id: 2, waiter: "b") else {
            Issue.record("expected two opens")
            return
        }
        guard case .wait = machine.lease(id: 3, waiter: "c") else {
            Issue.record("expected a park")
            return
        }
        #expect(machine.total == 2)
        #expect(machine.waiters.waiters == ["c"])
    }

    /// The lease that takes no waiter (the pool's path without a cell) hands out idle connections and free slots,
    /// and never goes before someone queued: then it answers `nil` and the caller queues behind them.
    @Test func aLeaseWithoutWaitingNeverJumpsTheQueue() {
        var machine = Machine(capacity: 1)
        guard case .open? = machine.leaseWithoutWaiting() else {
            Issue.record("expected an open in the free slot")
            return
        }
        #expect(machine.leaseWithoutWaiting() == nil, "full: the caller has to wait")
        guard case .wait = machine.lease(id: 1, waiter: "queued") else {
            Issue.record("expected a park")
            return
        }
        let connection = Connection()
        guard case .handOver(_, "queued") = machine.release(connection, .clean) else {
            Issue.record("expected a handover to the queued waiter")
            return
        }
        #expect(machine.leaseWithoutWaiting() == nil, "the connection went to the queued waiter")
        guard case .keepIdle = machine.release(connection, .clean), case .use(let idle)? = machine.leaseWithoutWaiting()
        else {
            Issue.record("expected the idle connection")
            return
        }
        #expect(idle === connection)
        _ = machine.close()
        guard case .fail? = machine.leaseWithoutWaiting() else {
            Issue.record("expected a failure once closed")
            return
        }
    }

    @Test func aCleanReturnGoesToTheFirstWaiterElseIdle() {
        var machine = Self.aLeasedAndBQueued()
        let connection = Connection()
        guard case .handOver(let handed, "b") = machine.release(connection, .clean) else {
            Issue.record("expected a handover to b")
            return
        }
        #expect(handed === connection)
        guard case .keepIdle = machine.release(connection, .clean) else {
            Issue.record("expected idle")
            return
        }
        guard case .use(let reused) = machine.lease(id: 3, waiter: "c") else {
            Issue.record("expected reuse")
            return
        }
        #expect(reused === connection)
    }

    @Test func aDirtyReturnIsCleanedBeforeAnyoneSeesIt() {
        var machine = Self.aLeasedAndBQueued()
        let connection = Connection()
        guard case .reset = machine.release(connection, .needsReset) else {
            Issue.record("expected a reset")
            return
        }
        #expect(machine.resetting == 1)
        #expect(machine.waiters.count == 1)  // b still waits: it is not handed a dirty connection
        guard case .handOver(_, "b") = machine.resetFinished(connection, clean: true) else {
            Issue.record("expected the clean connection to go to b")
            return
        }
        #expect(machine.resetting == 0)
    }

    @Test func aFailedResetFreesTheSlotForTheNextWaiter() {
        var machine = Self.aLeasedAndBQueued()
        let connection = Connection()
        _ = machine.release(connection, .needsReset)
        guard case .closeAndOpenFor(_, "b") = machine.resetFinished(connection, clean: false) else {
            Issue.record("expected close, and b opens in the slot")
            return
        }
        #expect(machine.total == 1)
    }

    @Test func aBrokenReturnWithNoWaiterFreesTheSlot() {
        var machine = Machine(capacity: 1)
        _ = machine.lease(id: 1, waiter: "a")
        guard case .close = machine.release(Connection(), .broken) else {
            Issue.record("expected close")
            return
        }
        #expect(machine.total == 0)
    }

    @Test func aCancelledWaiterLeavesAndASlotGivenUpGoesOnOrIsFreed() {
        var machine = Self.aLeasedAndBQueued()
        _ = machine.lease(id: 3, waiter: "c")
        let step1 = machine.cancel(id: 2, reason: .cancelled, asked: true)
        #expect(step1 == "b")
        let step2 = machine.cancel(id: 2, reason: .cancelled, asked: true)
        #expect(step2 == nil)
        let step3 = machine.slotFreed()
        #expect(step3 == "c")
        #expect(machine.total == 1)
        let step4 = machine.slotFreed()
        #expect(step4 == nil)
        #expect(machine.total == 0)
    }

    /// A cancel that reaches a lease before it asked to queue (its task was cancelled while it took its number)
    /// is kept for it: the lease is refused when it asks, gets nothing, and leaves nothing behind.
    @Test func aCancelBeforeTheLeaseAskedIsFoundWhenItAsks() {
        var machine = Machine(capacity: 1)
        _ = machine.lease(id: 1, waiter: "a")
        #expect(machine.cancel(id: 2, reason: .cancelled, asked: false) == nil)
        let deadline = ContinuousClock.now
        #expect(machine.cancel(id: 2, reason: .deadlineExceeded(deadline), asked: false) == nil)
        guard case .cancelled(let reason) = machine.lease(id: 2, waiter: "b") else {
            Issue.record("expected the lease to be refused")
            return
        }
        #expect(reason == .cancelled)  // the first reason counts
        #expect(machine.waiters.isEmpty)
        #expect(machine.waiters.remembered == 0)
        #expect(machine.total == 1)
    }

    /// A cancel after the waiter was handed a connection changes nothing: the hand-out took it out of the queue,
    /// so the connection is never handed out twice, and nothing is recorded for a lease that will not ask again.
    @Test func aCancelAfterTheHandOverChangesNothing() {
        var machine = Self.aLeasedAndBQueued()
        let connection = Connection()
        guard case .handOver(let handed, let waiter) = machine.release(connection, .clean) else {
            Issue.record("expected a hand-over")
            return
        }
        #expect(handed === connection && waiter == "b")
        #expect(machine.cancel(id: 2, reason: .cancelled, asked: true) == nil)
        #expect(machine.waiters.remembered == 0)
        #expect(machine.waiters.isEmpty)
        #expect(machine.idle.isEmpty)
    }

    @Test func closeFailsWaitersReturnsIdleAndClosesWhatComesBack() {
        var machine = Machine(capacity: 2)
        _ = machine.lease(id: 1, waiter: "a")
        _ = machine.lease(id: 2, waiter: "b")
        let idle = Connection()
        _ = machine.release(idle, .clean)
        _ = machine.lease(id: 3, waiter: "c")  // takes the idle one
        _ = machine.lease(id: 4, waiter: "d")  // parks
        let (idles, waiters, _) = machine.close()
        #expect(idles.isEmpty)
        #expect(waiters == ["d"])
        guard case .close = machine.release(idle, .clean) else {
            Issue.record("expected close after shutdown")
            return
        }
        guard case .fail = machine.lease(id: 5, waiter: "e") else {
            Issue.record("expected fail after shutdown")
            return
        }
    }
}
