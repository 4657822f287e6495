import Testing

@testable import ResourceKitIO

/// The control channel's decisions as a pure value; `PostgresCancellationTests` and `ProductionCancelTests` run
/// them through `PostgresCancelChannel` on real servers (a restart, a pooler, a role without the privilege), the
/// Redis example through its kill connection.
@Suite struct ControlChannelStateMachineTests {
    final class Connection: Sendable {
        let name: String
        init(_ name: String) { self.name = name }
    }
    typealias Machine = ControlChannelStateMachine<Connection, Int>

    let start = ContinuousClock.now
    let live: (Connection) -> Bool = { _ in false }
    let dead: (Connection) -> Bool = { _ in true }

    @Test func aVerifiedIdleControlConnectionTakesOneCancelAtATimeForItsOwnServerOnly() {
        let control = Connection("control")
        var machine = Machine(control: (control, 1), canReconnect: true, now: start)
        guard case .start(let used) = machine.tryStart(on: 1, isBroken: live, now: start) else {
            Issue.record("expected the control connection")
            return
        }
        #expect(used === control)
        guard case .cannot(nil, false) = machine.tryStart(on: 1, isBroken: live, now: start) else {
            Issue.record("busy: a second cancel uses a cancel request")
            return
        }
        machine.commandEnded(disable: false)
        guard case .cannot(nil, false) = machine.tryStart(on: 2, isBroken: live, now: start) else {
            Issue.record("another server's backend: a cancel request")
            return
        }
        #expect(machine.controlToLookAt(before: 2) === control, "verified elsewhere: looked at before the cancel")
        #expect(machine.controlToLookAt(before: 1) == nil)
        guard case .start = machine.tryStart(on: 1, isBroken: live, now: start) else {
            Issue.record("free again after its cancel ended")
            return
        }
    }

    @Test func anUnverifiedControlConnectionIsNeverUsedButIsClosedAtTheEnd() {
        let control = Connection("behind a pooler")
        var machine = Machine(control: (control, nil), canReconnect: false, now: start)
        guard case .cannot(nil, false) = machine.tryStart(on: 1, isBroken: live, now: start) else {
            Issue.record("expected a cancel request")
            return
        }
        #expect(machine.server == nil)
        let toClose = machine.close()
        #expect(toClose === control)
    }

    @Test func aDeadControlConnectionIsDroppedAndReconnectsBackOffFrom100msTo5s() {
        let control = Connection("old")
        var machine = Machine(control: (control, 1), canReconnect: true, now: start)
        guard case .cannot(let dropped?, true) = machine.tryStart(on: 1, isBroken: dead, now: start) else {
            Issue.record("expected the dead one dropped and a reconnect")
            return
        }
        #expect(dropped === control)
        #expect(machine.control == nil)
        // One attempt at a time.
        guard case .cannot(nil, false) = machine.tryStart(on: 1, isBroken: dead, now: start) else {
            Issue.record("a reconnect is under way already")
            return
        }
        let reconnects = machine.connectIfNeeded(isBroken: dead, now: start)
        #expect(!reconnects)
        // It fails: the next attempt waits 100 ms, then 200 ms, ... at most 5 s.
        var now = start
        var waits: [Duration] = []
        let toClose = machine.reconnectEnded(nil, now: now)
        #expect(toClose.isEmpty)
        for _ in 0..<8 {
            let reconnects2 = machine.connectIfNeeded(isBroken: dead, now: now)
            #expect(!reconnects2, "not before the backoff")
            var wait = Duration.milliseconds(100)
            while !machine.connectIfNeeded(isBroken: dead, now: now + wait) { wait += .milliseconds(100) }
            waits.append(wait)
            now += wait
            _ = machine.reconnectEnded(nil, now: now)
        }
        #expect(waits.map { $0 / .milliseconds(100) } == [1, 2, 4, 8, 16, 32, 50, 50].map(Double.init))
        // A verified one is kept, and the backoff starts again from 100 ms.
        let fresh = Connection("new")
        let reconnects3 = machine.connectIfNeeded(isBroken: dead, now: now + .seconds(5))
        #expect(reconnects3)
        let toClose2 = machine.reconnectEnded((fresh, 1), now: now)
        #expect(toClose2.isEmpty)
        #expect(machine.control === fresh)
        let reconnects4 = machine.connectIfNeeded(isBroken: live, now: now + .seconds(10))
        #expect(!reconnects4, "a live one needs no reconnect")
    }

    @Test func whatAReconnectMadeIsClosedWhenItIsOfNoUse() {
        var machine = Machine(control: nil, canReconnect: true, now: start)
        let reconnects = machine.connectIfNeeded(isBroken: live, now: start)
        #expect(reconnects)
        let unverified = Connection("pooler")
        let toClose = machine.reconnectEnded((unverified, nil), now: start)
        #expect(toClose.map(\.name) == ["pooler"])
        #expect(machine.control == nil)
        // A verified one replaces a broken one, which is returned to be closed.
        let first = Connection("first")
        let reconnects2 = machine.connectIfNeeded(isBroken: live, now: start + .seconds(1))
        #expect(reconnects2)
        _ = machine.reconnectEnded((first, 1), now: start + .seconds(1))
        let reconnects3 = machine.connectIfNeeded(isBroken: dead, now: start + .seconds(2))
        #expect(reconnects3, "the control connection broke")
        let second = Connection("second")
        let toClose2 = machine.reconnectEnded((second, 1), now: start + .seconds(2))
        #expect(toClose2.map(\.name) == ["first"])
        // A reconnect that ends after the close: its connection is closed, nothing is kept.
        let reconnects4 = machine.connectIfNeeded(isBroken: dead, now: start + .seconds(3))
        #expect(reconnects4)
        let toClose3 = machine.close()
        #expect(toClose3 === second)
        let lateToClose = machine.reconnectEnded((Connection("late"), 1), now: start + .seconds(3))
        #expect(lateToClose.map(\.name) == ["late"])
        #expect(machine.control == nil)
    }

    @Test func aRefusalForWantOfPrivilegeDisablesTheFastPathForGood() {
        let control = Connection("control")
        var machine = Machine(control: (control, 1), canReconnect: true, now: start)
        guard case .start = machine.tryStart(on: 1, isBroken: live, now: start) else {
            Issue.record("expected the control connection")
            return
        }
        machine.commandEnded(disable: true)
        guard case .cannot(nil, false) = machine.tryStart(on: 1, isBroken: live, now: start) else {
            Issue.record("disabled: cancel requests only")
            return
        }
        let reconnects = machine.connectIfNeeded(isBroken: dead, now: start + .seconds(60))
        #expect(!reconnects, "no reconnect once disabled")
        let toClose = machine.close()
        #expect(toClose === control, "kept for the close")
    }

    @Test func aChannelThatCannotReconnectOnlyDropsItsDeadConnection() {
        let control = Connection("given")
        var machine = Machine(control: (control, 1), canReconnect: false, now: start)
        guard case .cannot(let dropped?, false) = machine.tryStart(on: 1, isBroken: dead, now: start) else {
            Issue.record("expected the dead one dropped, no reconnect")
            return
        }
        #expect(dropped === control)
        let reconnects = machine.connectIfNeeded(isBroken: dead, now: start + .seconds(60))
        #expect(!reconnects)
        let toClose = machine.close()
        #expect(toClose == nil)
    }
}
