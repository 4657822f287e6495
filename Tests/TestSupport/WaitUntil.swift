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

/// Reads `events` until `done` holds for what was read, or `timeout` passes (then returns what it read): a
/// bounded loop over an event stream, which fails an assertion instead of hanging.
public func collectEvents<Element: Sendable>(
    _ events: AsyncStream<Element>,
    timeout: Duration = .seconds(10),
    until done: @escaping @Sendable ([Element]) -> Bool
) async -> [Element] {
    await withTaskGroup(of: [Element]?.self) { group in
        group.addTask {
            var seen: [Element] = []
            for await event in events {
                seen.append(event)
                if done(seen) { break }
            }
            return seen
        }
        group.addTask {
            try? await Task.sleep(for: timeout)  // the bound itself: a cancelled sleep just ends the race
            return nil
        }
        var result: [Element] = []
        for await outcome in group {
            if let outcome {
                result = outcome
                break
            }
        }
        group.cancelAll()
        return result
    }
}

/// Waits until a value of `stream` satisfies `predicate`: synchronisation by an event stream (for example
/// ``IOReactor/waitingDescriptorCounts()``), never by polling. Throws ``ConditionNeverHeld`` after `timeout`
/// instead of hanging.
public func until<Element: Sendable>(
    _ what: String,
    _ stream: AsyncStream<Element>,
    timeout: Duration = .seconds(10),
    _ predicate: @escaping @Sendable (Element) -> Bool
) async throws {
    let seen = await collectEvents(stream, timeout: timeout) { seen in seen.last.map(predicate) ?? false }
    guard let last = seen.last, predicate(last) else {
        throw ConditionNeverHeld(description: "timed out waiting for \(what)")
    }
}
