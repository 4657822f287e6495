import Testing

@testable import ResourceKitIO

/// The reactor's life as a pure value; `IOReactorExecutorTests` and the reactor suites run it through the real
/// loop (jobs after a shutdown run elsewhere, a sleeping loop is woken by a job, waits fail once it stopped).
@Suite struct ReactorLifecycleTests {
    typealias Lifecycle = ReactorLifecycle<String>

    /// Feeds `events` to a lifecycle in order and returns what each one answered, as text.
    static func run(_ lifecycle: inout Lifecycle, _ events: [Event]) -> [String] {
        var batch: [String] = []
        return events.map { event in
            switch event {
            case .enqueue(let job): return "\(lifecycle.enqueue(job))"
            case .turn:
                batch.removeAll()
                let action = lifecycle.loopTurn(taking: &batch)
                return batch.isEmpty ? "\(action)" : "\(action) \(batch)"
            case .awake:
                lifecycle.loopAwake()
                return "awake"
            case .shutdown: return "shutdown \(lifecycle.shutdown())"
            case .exited: return "exited \(lifecycle.loopExited())"
            }
        }
    }

    enum Event {
        case enqueue(String)
        case turn
        case awake
        case shutdown
        case exited
    }

    @Test func aJobWakesASleepingLoopOnceAndRunsOnItsNextTurn() {
        var lifecycle = Lifecycle(available: true)
        let answers = Self.run(
            &lifecycle, [.turn, .enqueue("a"), .enqueue("b"), .awake, .turn, .enqueue("c"), .turn, .turn])
        #expect(
            answers == [
                "sleep",
                "queuedWakeLoop",
                "queued",  // woken already: one signal for the two
                "awake",
                #"runJobs ["a", "b"]"#,
                "queued",  // awake and running jobs: no signal
                #"runJobs ["c"]"#,
                "sleep",
            ])
    }

    @Test func aShutdownStopsWaitsAtOnceAndTheLoopHandsItsJobsOnWhenItExits() {
        var lifecycle = Lifecycle(available: true)
        #expect(lifecycle.acceptsWaits)
        let answers = Self.run(
            &lifecycle, [.turn, .shutdown, .shutdown, .enqueue("late"), .turn, .exited, .enqueue("after")])
        #expect(
            answers == [
                "sleep",
                "shutdown true",  // the first one wakes the loop and fails the waiters
                "shutdown false",  // a second one does nothing
                "queued",  // the loop has not exited: it still takes the job
                "exit",
                #"exited ["late"]"#,  // to run on the global executor
                "runElsewhere",
            ])
        #expect(!lifecycle.acceptsWaits)
        #expect(lifecycle.state == .stopped)
    }

    @Test func anUnavailableReactorRunsEveryJobElsewhereAndAcceptsNoWait() {
        var lifecycle = Lifecycle(available: false)
        #expect(!lifecycle.acceptsWaits)
        let answers = Self.run(&lifecycle, [.enqueue("a"), .shutdown, .turn])
        #expect(answers == ["runElsewhere", "shutdown false", "exit"])
    }
}
