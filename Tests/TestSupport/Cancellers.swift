import Dispatch
import Synchronization

/// Plain threads (not the cooperative pool) that cancel things at chosen moments.
public final class Cancellers: Sendable {
    private let queues = (0..<4).map { DispatchQueue(label: "test.canceller.\($0)") }
    private let sink = Atomic<Int>(0)

    /// Busy-waits about `spins` iterations: a random point in time without sleeping.
    public init() {}

    public func spin(_ spins: Int) {
        for i in 0..<spins { sink.add(i & 1, ordering: .relaxed) }
    }

    /// Runs `action` on `count` threads at once, each after `spins` iterations.
    public func fire(_ count: Int, spins: Int, _ action: @escaping @Sendable () -> Void) {
        for queue in queues.prefix(count) {
            queue.async { [self] in
                spin(spins)
                action()
            }
        }
    }

    /// Waits until every queued action ran.
    public func drain() {
        for queue in queues { queue.sync {} }
    }
}
