import Testing

@testable import PostgresAdapter

/// The backend key in the connection's machine, and the route it picks for each stop: a pure value, no server.
/// The key's pointer is never dereferenced here (no cancel is sent), so a made-up address stands for libpq's.
@Suite struct StopRouteTests {
    private let now = ContinuousClock.now
    private let identity = PostgresBackendIdentity(
        pid: 4242, backendStart: 1, server: PostgresServerIdentity(postmasterStart: 2, systemIdentifier: "7"))

    private func sent(_ machine: inout ConnectionStateMachine) -> UInt64 {
        #expect(machine.begin() == .ready)
        return machine.sent()
    }

    @Test func aKeyAloneStopsByCancelRequest() {
        var machine = ConnectionStateMachine.keyed()
        let id = sent(&machine)
        #expect(machine.cancelRequested(id, now: now) == .send(id, .cancelRequest(.testKey)))
        #expect(!machine.isUnusable)
        #expect(machine.backendKey.pid == 4242)
        #expect(machine.backendKey.identity == nil)
    }

    @Test func aVerifiedBackendStopsByTheFastPathWithTheRequestBehindIt() throws {
        var machine = ConnectionStateMachine.keyed()
        machine.backendVerified(identity)
        let id = sent(&machine)
        #expect(machine.cancelRequested(id, now: now) == .send(id, .fastPath(identity, orRequest: .testKey)))
        #expect(machine.operationLeft(id, stop: true, now: now) == .none, "one stop per flight")
        let settlement = try #require(machine.nextCleanupStep().settlement)
        let close = machine.close(now: now)
        #expect(close == .settleThenFinish(settlement))
    }

    /// No BackendKeyData (a proxy stripped it): the stop is the connection's shutdown, decided with the stop, so
    /// the connection is broken from that moment and never handed out again.
    @Test func withoutAKeyTheStopShutsTheConnectionDownAndBreaksIt() {
        var machine = ConnectionStateMachine()
        machine.keyLearned(pid: 0, cancel: nil)
        let id = sent(&machine)
        #expect(machine.cancelRequested(id, now: now) == .send(id, .shutDown))
        #expect(machine.isUnusable)
        #expect(machine.cancelsInFlight == 1, "the shutdown is counted until it reports")
        #expect(machine.cancelFinished() != .none)
        machine.end()
        #expect(machine.begin() == .refuseUnusable)
    }

    @Test func theCloseStopsAQueryOnTheWireByTheSameRoute() {
        var machine = ConnectionStateMachine.keyed()
        machine.backendVerified(identity)
        let id = sent(&machine)
        guard case .cancelThenFinish(id, .fastPath(identity, orRequest: .testKey), _) = machine.close(now: now) else {
            Issue.record("the close's stop did not take the fast path")
            return
        }
    }

    /// The close frees the key only when no cancel can still use it: a cancel request stuck on a frozen server
    /// keeps it (leaked rather than freed under that thread). Either way the connection holds it no more.
    @Test func theKeyIsFreedOnlyWhenNoCancelCanStillUseIt() {
        var idle = ConnectionStateMachine.keyed()
        _ = idle.close(now: now)
        #expect(idle.keyReleased() == .testKey)
        #expect(idle.keyReleased() == nil, "released once")

        var frozen = ConnectionStateMachine.keyed()
        let id = sent(&frozen)
        #expect(frozen.cancelRequested(id, now: now) == .send(id, .cancelRequest(.testKey)))
        _ = frozen.close(now: now)
        #expect(frozen.keyReleased() == nil, "a cancel is still in flight")
        #expect(frozen.backendKey.cancel == nil)
    }
}

extension PGCancelPointer {
    /// A stand-in for libpq's `PGcancel *`, for machines that never send.
    static let testKey = PGCancelPointer(raw: OpaquePointer(bitPattern: 0x1000)!)
}

extension StopRoute {
    /// The route of ``ConnectionStateMachine/keyed()``'s stops.
    static let keyed = StopRoute.cancelRequest(.testKey)
}

extension ConnectionStateMachine {
    /// A machine whose connection came up with a key (and no verified backend): its stops are cancel requests.
    static func keyed() -> ConnectionStateMachine {
        var machine = ConnectionStateMachine()
        machine.keyLearned(pid: 4242, cancel: .testKey)
        return machine
    }
}
