/// Fan-out of values to any number of `AsyncStream` subscribers, each with its own newest-first buffer.
/// Subscriptions are removed when their consumer stops iterating. Thread-safe; yielding never blocks.
final class Broadcast<Element: Sendable>: Sendable {
    private struct State: Sendable {
        var subscribers: [UInt64: AsyncStream<Element>.Continuation] = [:]
        var nextID: UInt64 = 0
        var finished = false
    }

    private let state = Locked(State())

    /// A stream of every value yielded from now on; already finished if ``finish()`` ran.
    func subscribe(bufferingNewest limit: Int) -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream<Element>.makeStream(bufferingPolicy: .bufferingNewest(limit))
        let id = state.withLock { state -> UInt64? in
            guard !state.finished else { return nil }
            state.nextID += 1
            state.subscribers[state.nextID] = continuation
            return state.nextID
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    func yield(_ value: Element) {
        for subscriber in state.withLock({ Array($0.subscribers.values) }) {
            subscriber.yield(value)
        }
    }

    /// Ends every stream; later subscriptions end at once.
    func finish() {
        let subscribers = state.withLock { state -> [AsyncStream<Element>.Continuation] in
            state.finished = true
            defer { state.subscribers = [:] }
            return Array(state.subscribers.values)
        }
        for subscriber in subscribers { subscriber.finish() }
    }
}
