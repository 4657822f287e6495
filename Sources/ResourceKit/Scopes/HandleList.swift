/// A scope's registered handles, in registration order. The first is kept inline, so that the common scope (one
/// resource, or none) allocates no array (Docs/Architecture.md, "The cost of a scope").
struct HandleList: Sendable, RandomAccessCollection {
    private var first: ResourceHandle?
    private var rest: [ResourceHandle] = []

    init() {}

    var startIndex: Int { 0 }
    var endIndex: Int { first == nil ? 0 : 1 + rest.count }

    subscript(position: Int) -> ResourceHandle {
        position == 0 ? first! : rest[position - 1]
    }

    /// Whether every handle closes without suspending (``ResourceHandle/closesInline``), so that a scope's end
    /// needs no async frame for them.
    var allClosingInline: Bool {
        guard let first else { return true }
        return first.closesInline && rest.allSatisfy(\.closesInline)
    }

    mutating func append(_ handle: ResourceHandle) {
        if first == nil {
            first = handle
        } else {
            rest.append(handle)
        }
    }

    /// Removes `handle` (by identity); `false` if it is not in the list.
    mutating func remove(_ handle: ResourceHandle) -> Bool {
        guard let index = firstIndex(where: { $0 === handle }) else { return false }
        if index == 0 {
            first = rest.isEmpty ? nil : rest.removeFirst()
        } else {
            rest.remove(at: index - 1)
        }
        return true
    }
}
