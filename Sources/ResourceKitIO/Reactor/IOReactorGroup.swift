import Foundation
import Synchronization

/// Several reactors, one per core: the thread-per-core shape for I/O-bound server work under load.
///
/// One reactor thread is one core's worth of I/O: tasks that prefer it as their executor run beside every readiness
/// event of its descriptors, with no hop to another thread (see ``IOReactor``, "As a task executor"). A group
/// spreads that over the cores: hand each unit of work (a client connection, a request) to ``next()`` and keep its
/// external resources on the same reactor (a `PostgresShardedPool` does that for Postgres), so that a wait's event,
/// its task and its next system call stay on one thread and one core.
///
/// ```swift
/// let reactors = IOReactorGroup.shared
/// try await withThrowingDiscardingTaskGroup { group in
///     while true {
///         let reactor = reactors.next()
///         let client = try await listener.accept(in: scope, reactor: reactor)  // its socket waits there too
///         group.addTask(executorPreference: reactor) { try await serve(client) }
///     }
/// }
/// ```
///
/// When to prefer it: many concurrent queries or sockets, whose tasks mostly wait (the bench's sharded rows in
/// `Benchmarks/Results/`). Not for blocking or CPU-heavy work (it holds back every
/// wait of that reactor: use the cooperative pool or the `BlockingPool`), nor for a single sequential client.
///
/// Cancellation is the reactors' own: a wait on any of them ends the moment its task, handle or scope is cancelled.
public final class IOReactorGroup: Sendable {
    /// The process-wide group: ``IOReactor/shared`` and one more reactor per further active processor, started on
    /// first use. Never shut down.
    public static let shared = IOReactorGroup(
        first: .shared, count: ProcessInfo.processInfo.activeProcessorCount, name: "rk.reactor", owned: false)

    /// The group's reactors, at least one. Their order is fixed: a shard index names the same reactor for the
    /// group's life.
    public let reactors: [IOReactor]
    /// `false` for ``shared``: its reactors live as long as the process.
    private let owned: Bool
    private let turn = Atomic<Int>(0)

    /// Starts `count` reactors (clamped to 1...64), each with its own thread and epoll descriptor, named
    /// `name.0`, `name.1`, …. Shut the group down with ``shutdown()`` when it is no longer needed.
    public convenience init(count: Int, name: String = "rk.reactor") {
        self.init(first: IOReactor(name: "\(name).0"), count: count, name: name, owned: true)
    }

    private init(first: IOReactor, count: Int, name: String, owned: Bool) {
        let count = min(max(count, 1), 64)
        reactors = [first] + (1..<count).map { IOReactor(name: "\(name).\($0)") }
        self.owned = owned
    }

    /// Number of reactors.
    public var count: Int { reactors.count }

    /// The next reactor in turn (round robin, from any thread): the executor for a new unit of work.
    public func next() -> IOReactor {
        reactors[nextIndex()]
    }

    /// The index of the next reactor in turn (see ``next()``).
    public func nextIndex() -> Int {
        let value = turn.add(1, ordering: .relaxed).oldValue
        return (value % reactors.count + reactors.count) % reactors.count
    }

    /// The index of the reactor whose thread runs the caller (a task that prefers it as its executor, running now),
    /// or `nil` when the caller runs elsewhere (the cooperative pool, another thread).
    public var currentIndex: Int? {
        reactors.firstIndex { $0.isCurrentThread }
    }

    /// Stops the group's reactors (not ``IOReactor/shared``, which is never shut down); their waiters throw
    /// `ResourceKitError.Code.reactorUnavailable` and jobs of tasks that prefer them run on the global concurrent
    /// executor. Shutting down ``shared`` does nothing. Idempotent.
    public func shutdown() {
        guard owned else { return }
        for reactor in reactors { reactor.shutdown() }
    }
}
