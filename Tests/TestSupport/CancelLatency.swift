/// One cancel-to-return measurement, taken beside a reference task cancelled at the same instant.
///
/// On a 2-core machine running the whole suite in parallel, a process can be starved of CPU for hundreds of
/// milliseconds (a burst of Postgres backends forking, say). The reference, a task parked in `Task.sleep`, is the
/// runtime's own promptest cancellation path; whatever delays it delays the subject too. The subject's ``excess``
/// over it is what the path under test costs, and that is what a latency test bounds.
public struct CancelMeasurement<Success: Sendable>: Sendable {
    /// What the subject returned or threw.
    public let result: Result<Success, any Error>
    /// From `cancel()` to the subject's body returning.
    public let latency: Duration
    /// From the same `cancel()` to the reference task's body returning.
    public let reference: Duration

    /// The subject's latency beyond the reference's (zero when the reference took longer).
    public var excess: Duration { latency > reference ? latency - reference : .zero }
}

/// Starts `body` in a task, waits for `parked` (the event that says the body is blocked), then cancels the task
/// and a reference task at the same instant and measures both.
public func measureCancellation<Success: Sendable>(
    of body: @escaping @Sendable () async throws -> Success,
    whenParked parked: () async throws -> Void
) async throws -> CancelMeasurement<Success> {
    let reference = Task { () -> ContinuousClock.Instant in
        try? await Task.sleep(for: .seconds(3_600))
        return ContinuousClock.now
    }
    let subject = Task { () -> (Result<Success, any Error>, ContinuousClock.Instant) in
        do {
            let value = try await body()
            return (.success(value), ContinuousClock.now)
        } catch {
            return (.failure(error), ContinuousClock.now)
        }
    }
    do {
        try await parked()
    } catch {
        subject.cancel()
        reference.cancel()
        _ = await subject.value
        _ = await reference.value
        throw error
    }
    let cancelled = ContinuousClock.now
    subject.cancel()
    reference.cancel()
    let (result, returned) = await subject.value
    let referenceReturned = await reference.value
    return CancelMeasurement(result: result, latency: returned - cancelled, reference: referenceReturned - cancelled)
}

/// The median of `durations` (the upper one of the middle two for an even count); zero for none.
public func median(_ durations: [Duration]) -> Duration {
    guard !durations.isEmpty else { return .zero }
    return durations.sorted()[durations.count / 2]
}
