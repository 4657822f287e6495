import ResourceKit
import Testing

@testable import ResourceKitTesting

/// The kit's bounded wait for an operation's task (armed before a timed cancel).
@Suite struct TaskWatchTests {
    /// A task that does not end: the watch gives up at its limit, says so (`nil`), and does not wait on.
    @Test(.timeLimit(.minutes(1))) func aTaskThatDoesNotEndIsReportedAtTheLimit() async throws {
        let gate = OneShotEvent()
        // Owner: this test, which lets it end and awaits it below.
        let task = Task<Void, any Error> { try await gate.wait() }
        let (result, waited) = await TaskWatch(task, upTo: .milliseconds(100)).ended()
        #expect(result == nil)
        #expect(waited >= .milliseconds(100))
        #expect(waited < .seconds(5), "the watch waited on past its limit")  // generous: the subject is the bound
        gate.set()
        _ = await task.result
    }

    /// A task that ends: the watch returns its result, long before the limit.
    @Test func aTaskThatEndsIsReportedWithItsResult() async {
        // Owner: this test (the watch awaits it).
        let task = Task<Void, any Error> { throw CancellationError() }
        let (result, _) = await TaskWatch(task, upTo: .seconds(30)).ended()
        guard case .failure(let error)? = result else {
            Issue.record("expected the task's failure, got \(String(describing: result))")
            return
        }
        #expect(error is CancellationError)
    }
}
