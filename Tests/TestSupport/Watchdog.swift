import ResourceKit

/// The result of `task`, or `nil` when it has not ended within `bound`: the task is then cancelled, so that a
/// broken cancellation path fails the test that names it instead of hanging the whole suite. The bound is
/// generous (a path that works ends in milliseconds); it is a timeout, never a synchronisation.
public func outcome<Success: Sendable>(
    of task: Task<Success, any Error>, within bound: Duration = TimingBound.singleShot
) async -> Result<Success, any Error>? {
    let timedOut = Locked(false)
    let watchdog = Task {
        guard (try? await Task.sleep(for: bound)) != nil else { return }
        timedOut.withLock { $0 = true }
        task.cancel()
    }
    let result = await task.result
    watchdog.cancel()
    return timedOut.withLock { $0 } ? nil : result
}

extension Result {
    /// The error, if this is a failure.
    public var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
