// Package-wide: the no-subscriber fast path is `@inlinable` (one atomic load in the caller, no call).
package import Synchronization

/// Fan-out of values to any number of `AsyncStream` subscribers, each with its own buffer of the newest
/// values. Subscriptions are removed when their consumer stops iterating. Thread-safe; yielding never blocks,
/// and costs one atomic load when nobody subscribes. The one implementation behind every observable stream of
/// the package (registry events, reactor and pool counts, cancel statistics). Package access: an adapter outside
/// the package publishes its own streams with `AsyncStream` (Docs/Architecture.md, "Modules").
///
/// Call ``yield(_:)`` after releasing your own lock (decide under the lock, act after it).
package final class Broadcast<Element: Sendable>: Sendable {
    private struct State: Sendable {
        var subscribers: [UInt64: AsyncStream<Element>.Continuation] = [:]
        var nextID: UInt64 = 0
        var finished = false
    }

    private let state = Locked(State())

    /// A broadcast with no subscribers.
    package init() {}
    /// Mirrors `state.subscribers.count` (written under the lock), so that a producer with nobody listening
    /// skips building the value at all.
    @usableFromInline let subscriberCount = Atomic<Int>(0)

    /// `true` while at least one stream is subscribed. A value yielded concurrently with a subscription may or
    /// may not reach it, as with the lock alone.
    @inlinable
    package var hasSubscribers: Bool { subscriberCount.load(ordering: .relaxed) > 0 }

    /// A stream of every value yielded from now on, starting with `current()` read just after subscribing
    /// (so that no change between the read and the subscription is lost: the stream ends on the newest value).
    package func subscribe(bufferingNewest limit: Int, startingWith current: () -> Element) -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream<Element>.makeStream(bufferingPolicy: .bufferingNewest(limit))
        add(continuation)
        continuation.yield(current())
        return stream
    }

    /// A stream of every value yielded from now on; already finished if ``finish()`` ran.
    package func subscribe(bufferingNewest limit: Int) -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream<Element>.makeStream(bufferingPolicy: .bufferingNewest(limit))
        add(continuation)
        return stream
    }

    private func add(_ continuation: AsyncStream<Element>.Continuation) {
        let id = state.withLock { state -> UInt64? in
            guard !state.finished else { return nil }
            state.nextID += 1
            state.subscribers[state.nextID] = continuation
            subscriberCount.store(state.subscribers.count, ordering: .relaxed)
            return state.nextID
        }
        guard let id else {
            continuation.finish()
            return
        }
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            self.state.withLock { state in
                state.subscribers.removeValue(forKey: id)
                self.subscriberCount.store(state.subscribers.count, ordering: .relaxed)
            }
        }
    }

    /// Hands `value` to every subscriber.
    @inlinable
    package func yield(_ value: Element) {
        guard hasSubscribers else { return }
        yieldToSubscribers(value)
    }

    @usableFromInline
    func yieldToSubscribers(_ value: Element) {
        for subscriber in state.withLock({ Array($0.subscribers.values) }) {
            subscriber.yield(value)
        }
    }

    /// Ends every stream; later subscriptions end at once.
    package func finish() {
        let subscribers = state.withLock { state -> [AsyncStream<Element>.Continuation] in
            state.finished = true
            defer {
                state.subscribers = [:]
                subscriberCount.store(0, ordering: .relaxed)
            }
            return Array(state.subscribers.values)
        }
        for subscriber in subscribers { subscriber.finish() }
    }
}
