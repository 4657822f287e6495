/// Identifies a scheduled timer, for ``DeadlineTimers/cancel(_:)``.
public struct DeadlineTimerID: Sendable, Hashable {
    let rawValue: UInt64
}

/// A min-heap of deadlines with lazy deletion, as a value.
struct TimerHeap<Action> {
    private var heap: [(instant: ContinuousClock.Instant, id: UInt64)] = []
    private var actions: [UInt64: Action] = [:]
    private var nextID: UInt64 = 1

    /// Number of timers still scheduled.
    var count: Int { actions.count }

    /// Entries the heap stores, cancelled ones included until a compaction or a pop removes them (for tests:
    /// cancelled timers must not pile up).
    var storedCount: Int { heap.count }

    /// The earliest live deadline.
    mutating func nextDeadline() -> ContinuousClock.Instant? {
        while let top = heap.first, actions[top.id] == nil {
            popTop()
        }
        return heap.first?.instant
    }

    mutating func schedule(at instant: ContinuousClock.Instant, _ action: Action) -> DeadlineTimerID {
        let id = nextID
        nextID += 1
        actions[id] = action
        heap.append((instant, id))
        siftUp(heap.count - 1)
        if heap.count > 64 && heap.count > 2 * actions.count {
            compact()
        }
        return DeadlineTimerID(rawValue: id)
    }

    /// Cancels a timer; returns `false` if it already fired or was cancelled.
    @discardableResult
    mutating func cancel(_ id: DeadlineTimerID) -> Bool {
        actions.removeValue(forKey: id.rawValue) != nil
    }

    /// Removes and returns the actions of every timer due at `now`, earliest first.
    mutating func popExpired(now: ContinuousClock.Instant) -> [Action] {
        var due: [Action] = []
        while let top = heap.first, top.instant <= now {
            popTop()
            if let action = actions.removeValue(forKey: top.id) {
                due.append(action)
            }
        }
        return due
    }

    private mutating func compact() {
        heap = heap.filter { actions[$0.id] != nil }
        for index in stride(from: heap.count / 2 - 1, through: 0, by: -1) {
            siftDown(index)
        }
    }

    private mutating func popTop() {
        heap.swapAt(0, heap.count - 1)
        heap.removeLast()
        if !heap.isEmpty { siftDown(0) }
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].instant < heap[parent].instant else { return }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < heap.count && heap[left].instant < heap[smallest].instant { smallest = left }
            if right < heap.count && heap[right].instant < heap[smallest].instant { smallest = right }
            if smallest == parent { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }
}

extension TimerHeap: Sendable where Action: Sendable {}
