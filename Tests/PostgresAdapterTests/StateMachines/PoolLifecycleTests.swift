import Testing

import ResourceKit

@testable import PostgresAdapter

/// The pool's one machine: its life (running, shutting down, shut down) and the shared statements' queue inside
/// it, as a pure value. Connections are objects, waiters strings, a batch on the wire a number.
@Suite struct PoolLifecycleTests {
    typealias Connection = PoolStateMachineTests.Connection
    typealias Machine = PoolStateMachineTests.Machine

    static func statement(_ id: UInt64, _ waiter: String) -> SharedStatementMachine<String, Int>.Entry {
        .init(id: id, statement: PostgresStatement("SELECT \(id)"), waiter: waiter)
    }

    /// Running, with connection `leased` out to lease 1 and `idle` idle (capacity 2).
    static func oneLeasedOneIdle() -> (Machine, leased: Connection, idle: Connection) {
        var machine = Machine(capacity: 2, pipelineDepth: 4)
        _ = machine.lease(id: 1, waiter: "a")
        _ = machine.lease(id: 2, waiter: "b")
        let leased = Connection()
        let idle = Connection()
        _ = machine.release(idle, .clean)
        return (machine, leased, idle)
    }

    @Test func closeReturnsIdleLesseesAndStatementsOnceAndWaitsForWhatIsOut() {
        var (machine, leased, idle) = Self.oneLeasedOneIdle()
        _ = machine.lease(id: 3, waiter: "c")  // takes the idle one
        _ = machine.release(idle, .clean)  // back idle
        _ = machine.lease(id: 4, waiter: "d")  // takes it again
        _ = machine.lease(id: 5, waiter: "e")  // parks
        _ = machine.release(idle, .clean)  // handed to "e"
        _ = machine.lease(id: 6, waiter: "f")  // parks
        guard case .startDriver(let driver) = machine.shared.submit(Self.statement(7, "s")) else {
            Issue.record("expected a driver for the first statement")
            return
        }
        #expect(machine.lifecycle == .running)

        let (idles, lessees, statements) = machine.close()
        #expect(idles.isEmpty)
        #expect(lessees == ["f"])
        #expect(statements == ["s"])
        #expect(machine.lifecycle == .shuttingDown)
        let again = machine.close()
        #expect(again.idle.isEmpty && again.waiters.isEmpty && again.statements.isEmpty)

        // Two connections and one driver are still out: each keeps the pool shutting down until it is back.
        guard case .close = machine.release(leased, .clean) else {
            Issue.record("expected close after shutdown")
            return
        }
        #expect(machine.lifecycle == .shuttingDown)
        guard case .stop(replacement: nil) = machine.takeBatch(driver) else {
            Issue.record("expected the driver to stop after shutdown")
            return
        }
        #expect(machine.lifecycle == .shuttingDown)
        guard case .close = machine.release(idle, .needsReset) else {
            Issue.record("expected close, not a reset, after shutdown")
            return
        }
        #expect(machine.lifecycle == .shutDown)
        #expect(machine.total == 0)
    }

    @Test func anIdlePoolIsShutDownAtOnce() {
        var machine = Machine(capacity: 1)
        _ = machine.lease(id: 1, waiter: "a")
        let connection = Connection()
        _ = machine.release(connection, .clean)
        let (idles, lessees, statements) = machine.close()
        #expect(idles.count == 1 && idles[0] === connection)
        #expect(lessees.isEmpty && statements.isEmpty)
        #expect(machine.lifecycle == .shutDown)
    }

    @Test func aConnectionBeingCleanedOrOpenedHoldsTheShutdownOpen() {
        // Being cleaned: its reset finishes after the close, and the connection is closed.
        var cleaning = Machine(capacity: 1)
        _ = cleaning.lease(id: 1, waiter: "a")
        let connection = Connection()
        guard case .reset = cleaning.release(connection, .needsReset) else {
            Issue.record("expected a reset")
            return
        }
        _ = cleaning.close()
        #expect(cleaning.lifecycle == .shuttingDown)
        guard case .close = cleaning.resetFinished(connection, clean: true) else {
            Issue.record("expected close after the reset, the pool being shut down")
            return
        }
        #expect(cleaning.lifecycle == .shutDown)

        // Being opened: the slot is given up (the open failed, or its lessee left) and nobody gets it.
        var opening = Machine(capacity: 1)
        _ = opening.lease(id: 1, waiter: "a")
        _ = opening.close()
        #expect(opening.lifecycle == .shuttingDown)
        #expect(opening.slotFreed() == nil)
        #expect(opening.lifecycle == .shutDown)
    }

    @Test func nothingNewIsServedOnceShuttingDownOrShutDown() {
        for leaveOneOut in [true, false] {
            var machine = Machine(capacity: 2)
            _ = machine.lease(id: 1, waiter: "a")
            let out = Connection()
            if !leaveOneOut { _ = machine.release(out, .clean) }
            _ = machine.close()
            #expect(machine.lifecycle == (leaveOneOut ? .shuttingDown : .shutDown))
            guard case .fail? = machine.leaseWithoutWaiting(), case .fail = machine.lease(id: 2, waiter: "b") else {
                Issue.record("expected a lease to fail (\(machine.lifecycle))")
                continue
            }
            guard case .refuseClosed = machine.shared.submit(Self.statement(3, "s")) else {
                Issue.record("expected a statement to be refused (\(machine.lifecycle))")
                continue
            }
            #expect(machine.waiters.isEmpty && machine.shared.pending.isEmpty)
        }
    }

    @Test func aDriverStopsForAQueuedLesseeInTheSameStep() {
        var machine = Machine(capacity: 1, pipelineDepth: 4)
        _ = machine.lease(id: 1, waiter: "a")  // opens the only slot
        guard case .startDriver(let driver) = machine.shared.submit(Self.statement(2, "s")) else {
            Issue.record("expected a driver")
            return
        }
        guard case .send(let batch) = machine.takeBatch(driver), batch.map(\.waiter) == ["s"] else {
            Issue.record("expected the batch while no lessee waits")
            return
        }
        _ = machine.shared.write(driver)
        _ = machine.shared.batchSent(driver, as: 10)
        _ = machine.shared.finished(driver, 2, .failure(PostgresError(.connection, "test")))
        _ = machine.shared.batchEnded(driver)
        _ = machine.shared.submit(Self.statement(3, "t"))
        _ = machine.lease(id: 4, waiter: "b")  // a lessee queues
        guard case .stop = machine.takeBatch(driver) else {
            Issue.record("expected the driver to stop for the queued lessee")
            return
        }
        #expect(machine.lifecycle == .running)
    }

    @Test func aDriverThatFailsToLeaseFailsTheQueueAndSettlesTheShutdown() {
        var machine = Machine(capacity: 1)
        guard case .startDriver(let driver) = machine.shared.submit(Self.statement(1, "s")) else {
            Issue.record("expected a driver")
            return
        }
        _ = machine.shared.submit(Self.statement(2, "t"))
        #expect(machine.driverFailed(driver) == ["s", "t"])
        #expect(machine.lifecycle == .running)

        guard case .startDriver(let second) = machine.shared.submit(Self.statement(3, "u")) else {
            Issue.record("expected a new driver")
            return
        }
        #expect(machine.close().statements == ["u"])
        #expect(machine.lifecycle == .shuttingDown)
        #expect(machine.driverFailed(second).isEmpty)
        #expect(machine.lifecycle == .shutDown)
    }
}
