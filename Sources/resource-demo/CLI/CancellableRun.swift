import DemoRuntime
import DemoCommandLine
import ResourceKit
import ResourceKitPatterns

/// How one cancellable demo operation ended, with the time from the cancel to the task's return.
struct RunReport<Value> {
    var outcome: Outcome<Value>
    /// From the cancel (`--cancel-after` or a signal) to the operation's return; nil if nothing cancelled it.
    var cancelToReturn: Duration?

    var json: JSONLine {
        var line = JSONLine()
        line.set("outcome", .string(outcome.name))
        line.set("cancel_to_return_us", cancelToReturn.map { .int($0.microseconds) } ?? .null)
        if case .failed(let error) = outcome { line.set("error", .string(String(describing: error))) }
        return line
    }

    /// 0 for completed or cancelled (as asked), 1 for failed or a deadline.
    var exitStatus: Int32 {
        switch outcome {
        case .completed, .cancelled: return 0
        case .deadlineExceeded, .failed: return 1
        }
    }
}

/// Runs `operation` on its own task, cancelled after `cancelAfter` if given, or when the caller's task is
/// cancelled (a signal); measures cancel-to-return from a task on the cooperative pool.
func runCancellable<Value: Sendable>(
    cancelAfter: Duration?,
    _ operation: @escaping @Sendable () async throws -> Value
) async -> RunReport<Value> {
    let cancelledAt = Locked<ContinuousClock.Instant?>(nil)
    // Owner: this function, which awaits it.
    let task = Task { try await operation() }
    let markAndCancel: @Sendable () -> Void = {
        cancelledAt.withLock { $0 = $0 ?? .now }
        task.cancel()
    }
    let timer = cancelAfter.map { delay in
        // Owner: this function, which cancels it once the operation returned.
        Task {
            try await Task.sleep(for: delay)
            markAndCancel()
        }
    }
    let result = await withTaskCancellationHandler {
        await task.result
    } onCancel: {
        markAndCancel()
    }
    let returned = ContinuousClock.now
    timer?.cancel()
    let cancelled = cancelledAt.withLock { $0 }
    switch result {
    case .success(let value):
        return RunReport(outcome: .completed(value), cancelToReturn: nil)
    case .failure(let error):
        return RunReport(
            outcome: .classify(error, taskWasCancelled: cancelled != nil),
            cancelToReturn: cancelled.map { returned - $0 })
    }
}
