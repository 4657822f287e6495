import Dispatch
import PostgresTestSupport
import ResourceKit
import Testing

@testable import PostgresAdapter

/// The product's promise, pinned for a query that runs without an operation of its own: its cancel request goes
/// out from inside the cancelling call (the parked wait's hook, on the canceller's thread), not when the
/// cancelled task next runs. The query's task prefers an executor that holds its jobs until the test lets them
/// run, so nothing of the task can run between `task.cancel()` and the check.
@Suite struct CancelFromTheCancellingCallTests {
    @Test func aParkedQuerysCancelGoesOutBeforeItsTaskRunsAgain() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let held = HeldExecutor()
        defer { held.release() }
        try await withResourceScope("pg", registry: ResourceRegistry()) { scope in
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            let pid = try #require(connection.backendPID)
            let task = Task(executorPreference: held) { try await connection.execute("SELECT pg_sleep(20)") }
            // The task sends its query and parks on the reactor within its first job.
            await held.runUntilIdle()
            try await TestDatabase.waitUntilActive(pid, observer: observer)
            await held.runUntilIdle()
            #expect(connection.state.withLock { $0.machine.cancels } == nil)

            task.cancel()
            // The wait resumed its task (a job now held here), and the cancel is already counted for its query.
            #expect(held.queued >= 1)
            #expect(
                connection.state.withLock { $0.machine.cancels } != nil, "the cancel waited for the task to run")

            held.release()
            await #expect(throws: CancellationError.self) { try await task.value }
            #expect(try await TestDatabase.waitUntilNotActive(pid, observer: observer) != nil)
            #expect(try await connection.query("SELECT 1").count == 1)
        }
    }
}

/// A task executor that runs a task's jobs only when told to (``runUntilIdle()``), then, once released, hands
/// every job to the global concurrent executor, so that no task that prefers it can hang.
final class HeldExecutor: TaskExecutor, Sendable {
    private struct State {
        var jobs: [UnownedJob] = []
        var released = false
    }

    private let state = Locked(State())
    private let queue = DispatchQueue(label: "held-executor")

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let held = state.withLock { state -> Bool in
            guard !state.released else { return false }
            state.jobs.append(job)
            return true
        }
        if !held { globalConcurrentExecutor.enqueue(job) }
    }

    /// Jobs waiting to run.
    var queued: Int { state.withLock { $0.jobs.count } }

    /// Runs the queued jobs, and the ones they queue, on a thread of its own until none is left.
    func runUntilIdle() async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            queue.async {
                while true {
                    let jobs = self.state.withLock { state -> [UnownedJob] in
                        defer { state.jobs = [] }
                        return state.jobs
                    }
                    if jobs.isEmpty { break }
                    for job in jobs { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
                }
                done.resume()
            }
        }
    }

    /// From now on every job goes to the global concurrent executor, the queued ones first.
    func release() {
        let jobs = state.withLock { state -> [UnownedJob] in
            state.released = true
            defer { state.jobs = [] }
            return state.jobs
        }
        for job in jobs { globalConcurrentExecutor.enqueue(job) }
    }
}
