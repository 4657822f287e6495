import EmbeddedPostgres
import Foundation
import Synchronization
import Testing

/// A termination's cleanup closes the admissions before it stops and sweeps (Docs/Architecture.md, "Nothing outlives
/// its owner"): a fixture in the making finishes first, so the sweep sees it, and none is made after. On instances
/// of their own: the process's admissions stay open for the other tests.
@Suite struct FixtureAdmissionsTests {
    @Test func anOpenGateRunsTheMaking() throws {
        let admissions = FixtureAdmissions()
        #expect(admissions.isOpen)
        #expect(try admissions.admit { 42 } == 42)
    }

    @Test func aClosedGateRefusesAndMakesNothing() {
        let admissions = FixtureAdmissions()
        admissions.close()
        #expect(!admissions.isOpen)
        var made = false
        #expect(throws: FixtureAdmissions.Closed.self) { try admissions.admit { made = true } }
        #expect(!made)
    }

    /// A close that begins while a making runs returns only after it: the making waits 200 ms (a bound on an
    /// event that must not come) for the close to return, and the close is seen to return after the making.
    @Test func aCloseWaitsForTheMakingInProgress() async throws {
        let admissions = FixtureAdmissions()
        let order = Mutex<[String]>([])
        let inside = DispatchSemaphore(value: 0)
        let closing = DispatchSemaphore(value: 0)
        let closed = DispatchSemaphore(value: 0)
        let made = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            _ = try? admissions.admit {
                inside.signal()
                closing.wait()
                // The close must not return while this making runs.
                if closed.wait(timeout: .now() + .milliseconds(200)) == .success { closed.signal() }
                order.withLock { $0.append("made") }
            }
            made.signal()
        }
        inside.wait()
        Thread.detachNewThread {
            closing.signal()
            admissions.close()
            order.withLock { $0.append("closed") }
            closed.signal()
        }
        made.wait()
        closed.wait()
        #expect(order.withLock { $0 } == ["made", "closed"])
        #expect(!admissions.isOpen)
    }
}
