/// Thrown by ``waitUntil(_:timeout:_:)`` when the awaited state never came.
public struct ConditionNeverHeld: Error, CustomStringConvertible {
    public let description: String
    public init(description: String) { self.description = description }
}

/// Yields until `condition` holds: for awaiting an observable state (a wait parked in the reactor, a job
/// queued) rather than sleeping. Fails instead of hanging.
public func waitUntil(
    _ what: String = "condition",
    timeout: Duration = .seconds(10),
    _ condition: () -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        if ContinuousClock.now > deadline { throw ConditionNeverHeld(description: "timed out waiting for \(what)") }
        await Task.yield()
    }
}
