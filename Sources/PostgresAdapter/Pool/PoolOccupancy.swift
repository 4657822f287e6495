import ResourceKit

/// How full a ``PostgresPool`` is at one instant.
public struct PoolOccupancy: Sendable, Hashable {
    /// Open connections (idle, leased, being cleaned or opened).
    public var open: Int
    /// Idle connections.
    public var idle: Int
    /// Tasks waiting for a connection.
    public var waiters: Int
}

/// The subscribers of ``PostgresPool/occupancyUpdates()``: changes are published after the pool's lock.
final class PoolOccupancyWatchers: Sendable {
    private struct State: Sendable {
        var subscribers: [UInt64: AsyncStream<PoolOccupancy>.Continuation] = [:]
        var next: UInt64 = 0
    }

    private let state = Locked(State())

    func subscribe(current: () -> PoolOccupancy) -> AsyncStream<PoolOccupancy> {
        let (stream, continuation) = AsyncStream<PoolOccupancy>.makeStream(bufferingPolicy: .bufferingNewest(64))
        let id = state.withLock { state -> UInt64 in
            state.next += 1
            state.subscribers[state.next] = continuation
            return state.next
        }
        continuation.yield(current())
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    func publish(_ occupancy: PoolOccupancy) {
        for subscriber in state.withLock({ Array($0.subscribers.values) }) { subscriber.yield(occupancy) }
    }
}
