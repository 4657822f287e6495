/// The waiters an operation tracks, by identity. An operation's body almost always waits on one thing at a time
/// (a reactor wait, a pool job), so the first waiter is kept inline and only further ones go to a dictionary:
/// the common operation (a query) allocates nothing here, where a dictionary alone allocated its storage on the
/// first insert and freed it at the end, once per operation.
struct OperationWaiters<Waiter> {
    private var first: (id: ObjectIdentifier, waiter: Waiter)?
    /// The others; never holds `first`'s id.
    private var rest: [ObjectIdentifier: Waiter] = [:]

    var count: Int { (first == nil ? 0 : 1) + rest.count }

    /// Every waiter, in no particular order.
    var all: [Waiter] {
        var result: [Waiter] = []
        result.reserveCapacity(count)
        if let first { result.append(first.waiter) }
        result.append(contentsOf: rest.values)
        return result
    }

    /// Tracks `waiter` under `id`, replacing one tracked under the same id.
    mutating func insert(_ waiter: Waiter, id: ObjectIdentifier) {
        if let current = first, current.id == id {
            first = (id, waiter)
        } else if first == nil, rest[id] == nil {
            first = (id, waiter)
        } else {
            rest[id] = waiter
        }
    }

    /// Forgets the waiter tracked under `id`, if any.
    mutating func remove(id: ObjectIdentifier) {
        if let current = first, current.id == id {
            first = nil
        } else if !rest.isEmpty {
            rest[id] = nil
        }
    }
}

extension OperationWaiters: Sendable where Waiter: Sendable {}
