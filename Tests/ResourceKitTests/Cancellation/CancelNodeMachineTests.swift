import Testing

@testable import ResourceKit

/// ``CancelNodeMachine`` as a pure value: every event (park, unpark, attach, detach, cancel, finish) in every phase
/// (live, cancelled, finished). Its members are plain cells and operations that never run.
@Suite struct CancelNodeMachineTests {
    enum Phase: String, CaseIterable {
        case live, cancelled, finished
    }

    static let deadline = ContinuousClock.now

    /// A machine in `phase`, with one child and one parked wait when live.
    static func machine(in phase: Phase) -> CancelNodeMachine {
        var machine = CancelNodeMachine()
        _ = machine.attach(node())
        _ = machine.park(CancellationCell<Void>())
        switch phase {
        case .live: break
        case .cancelled: _ = machine.cancel(.deadlineExceeded(deadline))
        case .finished: machine.finish()
        }
        return machine
    }

    static func node() -> ResourceOperation {
        ResourceOperation(onCancel: { _ in }, deadline: nil, scope: nil, handle: nil, task: 0)
    }

    @Test(arguments: Phase.allCases)
    func park(in phase: Phase) {
        var machine = Self.machine(in: phase)
        let wait = CancellationCell<Void>()
        let expected: CancelNodeMachine.Park =
            switch phase {
            case .live: .parked
            case .cancelled: .alreadyCancelled(.deadlineExceeded(Self.deadline))
            case .finished: .notTracked
            }
        #expect(machine.park(wait) == expected)
        #expect(machine.memberCount == (phase == .live ? 3 : 0), "kept only while live")
    }

    @Test(arguments: Phase.allCases)
    func unpark(in phase: Phase) {
        var machine = Self.machine(in: phase)
        let wait = CancellationCell<Void>()
        _ = machine.park(wait)
        machine.unpark(wait)
        machine.unpark(wait)  // twice, or never parked: nothing happens
        #expect(machine.memberCount == (phase == .live ? 2 : 0))
    }

    @Test(arguments: Phase.allCases)
    func attach(in phase: Phase) {
        var machine = Self.machine(in: phase)
        let expected: CancelNodeMachine.Attach =
            switch phase {
            case .live: .attached
            case .cancelled: .cancelled(.deadlineExceeded(Self.deadline))
            case .finished: .notTracked
            }
        #expect(machine.attach(Self.node()) == expected)
        #expect(machine.memberCount == (phase == .live ? 3 : 0))
    }

    @Test(arguments: Phase.allCases)
    func detach(in phase: Phase) {
        var machine = Self.machine(in: phase)
        let child = Self.node()
        _ = machine.attach(child)
        machine.detach(child)
        machine.detach(child)
        #expect(machine.memberCount == (phase == .live ? 2 : 0))
    }

    @Test(arguments: Phase.allCases)
    func cancel(in phase: Phase) {
        var machine = Self.machine(in: phase)
        let members = machine.cancel(.cancelled)
        switch phase {
        case .live:
            #expect(members?.children.count == 1)
            #expect(members?.parked.count == 1)
            #expect(machine.memberCount == 0, "handed out in the same step: each member is reached once")
            #expect(machine.phase == .cancelled(.cancelled))
        case .cancelled:
            #expect(members == nil, "acts once")
            #expect(machine.phase == .cancelled(.deadlineExceeded(Self.deadline)), "the first reason counts")
        case .finished:
            #expect(members == nil, "a finished node is not cancelled")
            #expect(machine.phase == .finished)
            #expect(machine.cancelReason == nil)
        }
    }

    @Test(arguments: Phase.allCases)
    func finish(in phase: Phase) {
        var machine = Self.machine(in: phase)
        machine.finish()
        #expect(machine.phase == .finished)
        #expect(machine.memberCount == 0, "forgets its members")
        #expect(machine.park(CancellationCell<Void>()) == .notTracked)
    }
}
