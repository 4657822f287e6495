/// The waiters an operation tracks, by identity. An operation's body almost always waits on one thing at a time
/// (a reactor wait, a pool job), so the first waiter is kept inline and only further ones go to a dictionary:
/// the common operation (a query) allocates nothing here, where a dictionary alone allocated its storage on the
/// first insert and freed it at the end, once per operation.
///
/// The first waiter is two optionals, not one optional tuple: `(id: ObjectIdentifier, waiter: Waiter)?` was
/// miscompiled in unspecialised code of release builds (Swift 6.3: after `first = nil`, `first == nil` was false
/// while `if let first` found nothing; `OperationWaitersTests` in a release build with `-enable-testing` showed it).
struct OperationWaiters<Waiter> {
    /// Set together with `firstWaiter`, cleared together.
    private var firstID: ObjectIdentifier?
    private var firstWaiter: Waiter?
    /// The others; never holds `firstID`.
    private var rest: [ObjectIdentifier: Waiter] = [:]

    var count: Int { (firstID == nil ? 0 : 1) + rest.count }

    /// Every waiter, in no particular order.
    var all: [Waiter] {
        var result: [Waiter] = []
        result.reserveCapacity(count)
        if firstID != nil, let firstWaiter { result.append(firstWaiter) }
        result.append(contentsOf: rest.values)
        return result
    }

    /// Tracks `waiter` under `id`, replacing one tracked under the same id.
    mutating func insert(_ waiter: Waiter, id: ObjectIdentifier) {
        if firstID == id || (firstID == nil && rest[id] == nil) {
            firstID = id
            firstWaiter = waiter
        } else {
            rest[id] = waiter
        }
    }

    /// Forgets the waiter tracked under `id`, if any.
    mutating func remove(id: ObjectIdentifier) {
        if firstID == id {
            firstID = nil
            firstWaiter = nil
        } else if !rest.isEmpty {
            rest[id] = nil
        }
    }
}

extension OperationWaiters: Sendable where Waiter: Sendable {}
