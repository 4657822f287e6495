import ResourceKit

/// Thrown by ``until(_:_:timeout:_:)`` when the awaited state never came: the tests' alternative to hanging.
public struct ConditionNeverHeld: Error, CustomStringConvertible {
    public let description: String
    public init(description: String) { self.description = description }
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
        // The first to end decides: the reader (done held, or the stream finished), or the timeout, which
        // then cancels the reader; a cancelled iteration ends, and the reader returns what it read so far.
        var result: [Element] = []
        for await outcome in group {
            group.cancelAll()
            if let outcome { result = outcome }
        }
        return result
    }
}

/// Waits until a value of `stream` satisfies `predicate`: synchronisation by an event stream (for example
/// `IOReactor/waitingDescriptorCounts()`), never by polling. Throws ``ConditionNeverHeld`` after `timeout`
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

/// A value a test's own code updates and another part of the test awaits: `update` publishes every new
/// value to ``values()``, so that waiting is an event (with ``until(_:_:timeout:_:)``), never a poll.
public final class ObservedValue<Value: Sendable>: Sendable {
    private let state: Locked<Value>
    private let changes = Broadcast<Value>()

    /// A value starting at `initial`.
    public init(_ initial: Value) {
        state = Locked(initial)
    }

    /// The current value.
    public var value: Value { state.withLock { $0 } }

    /// Changes the value and publishes the result; returns what `body` returned.
    @discardableResult
    public func update<Result: Sendable>(_ body: (inout Value) -> Result) -> Result {
        let (result, value) = state.withLock { value -> (Result, Value) in (body(&value), value) }
        changes.yield(value)
        return result
    }

    /// The current value, then every update.
    public func values() -> AsyncStream<Value> {
        changes.subscribe(bufferingNewest: 64) { value }
    }
}
