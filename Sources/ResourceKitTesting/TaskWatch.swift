import ResourceKit

/// A bounded wait for a task the kit started, armed when it is made: a check makes it *before* it cancels the task,
/// so that between the cancel and its own suspension it does nothing (no task to create, no timer to arm, no
/// thread to wake while the operation is returning) and a cancel-to-return figure holds the adapter's path only.
struct TaskWatch: Sendable {
    private let bounded: Task<(Result<Void, any Error>?, Duration), Never>

    /// Starts watching `task`: the wait ends when it ends or `limit` after now (then with `nil`: the hang report).
    init(_ task: Task<Void, any Error>, upTo limit: Duration) {
        let done = OneShotEvent()
        let result = Locked<Result<Void, any Error>?>(nil)
        // Owner: this watch; `bounded` awaits it through `done` (at most `limit`), and the check awaits `bounded`.
        Task {
            let ended = await task.result
            result.withLock { $0 = ended }
            done.set()
        }
        // Owner: the check that made the watch, which awaits it in `ended()`; it ends by itself within `limit`.
        bounded = Task {
            let started = ContinuousClock.now
            // Ends when the task ends or at the deadline; nothing else is waited for. Shielded: the check's own
            // scope (a deadline check's) is the borrowing scope of this wait, and must not end it.
            try? await done.wait(deadline: started + limit, shielded: true)
            return (result.withLock { $0 }, ContinuousClock.now - started)
        }
    }

    /// The task's result, or `nil` if it had not ended within the limit; and how long the watch waited.
    func ended() async -> (Result<Void, any Error>?, Duration) {
        await bounded.value
    }
}
