import ResourceKit

/// The decisions of ``LatestTask`` as a pure value: which generation runs, what a new id does, what closing
/// cancels. The driver performs the actions (start a task, cancel a task) outside its lock.
struct LatestTaskStateMachine<ID: Equatable> {
    struct Current {
        var id: ID
        var generation: UInt64
    }

    enum UpdateAction: Equatable {
        /// Start work for `generation`; cancel the work of `superseding`, if any is still running.
        case start(generation: UInt64, superseding: UInt64?)
        /// The id equals the current one: nothing restarts.
        case unchanged
        /// The task was cancelled or closed: it takes no more ids.
        case refuseClosed
        /// The update came from the task's own work: the output is feeding the id (a restart loop).
        case refuseFeedbackLoop
    }

    private(set) var current: Current?
    private(set) var running: Set<UInt64> = []
    private(set) var isClosed = false
    private var nextGeneration: UInt64 = 0

    mutating func update(id: ID, fromOwnWork: Bool) -> UpdateAction {
        if isClosed { return .refuseClosed }
        if let current, current.id == id { return .unchanged }
        if fromOwnWork { return .refuseFeedbackLoop }
        nextGeneration += 1
        let superseded = current.map(\.generation).flatMap { running.contains($0) ? $0 : nil }
        current = Current(id: id, generation: nextGeneration)
        running.insert(nextGeneration)
        return .start(generation: nextGeneration, superseding: superseded)
    }

    /// The work of `generation` ended; returns whether it was still the current generation.
    mutating func workFinished(generation: UInt64) -> Bool {
        running.remove(generation)
        return current?.generation == generation
    }

    /// Takes no more ids; returns the generations whose work must be cancelled.
    mutating func close() -> [UInt64] {
        guard !isClosed else { return [] }
        isClosed = true
        return running.sorted()
    }
}

extension LatestTaskStateMachine: Sendable where ID: Sendable {}
extension LatestTaskStateMachine.Current: Sendable where ID: Sendable {}
