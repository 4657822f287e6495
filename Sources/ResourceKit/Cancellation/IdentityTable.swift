/// What is in flight on one object, by the identity of each member: a node's parked waits and children, a handle's
/// running operations and waits. Each of them almost always holds one member at a time (a query waits on one
/// thing; a resource runs one operation), so the first member is kept inline and only further ones go to a
/// dictionary: the common case allocates nothing and hashes nothing, where a dictionary alone allocated its
/// storage on the first insert and hashed the identity on every insert and removal (Docs/Architecture.md, "State
/// machines and their owners").
///
/// The first member is two optionals, not one optional tuple: `(id: ObjectIdentifier, member: Element)?` was
/// miscompiled in unspecialised code of release builds (Swift 6.3: after `first = nil`, `first == nil` was false
/// while `if let first` found nothing; `IdentityTableTests` in a release build with `-enable-testing` showed it).
struct IdentityTable<Element> {
    /// Set together with `firstMember`, cleared together.
    private var firstID: ObjectIdentifier?
    private var firstMember: Element?
    /// The others; never holds `firstID`.
    private var rest = [ObjectIdentifier: Element]()

    init() {}

    var count: Int { (firstID == nil ? 0 : 1) + rest.count }
    var isEmpty: Bool { firstID == nil && rest.isEmpty }

    /// Every member, in no particular order.
    var all: [Element] {
        var result: [Element] = []
        result.reserveCapacity(count)
        if firstID != nil, let firstMember { result.append(firstMember) }
        result.append(contentsOf: rest.values)
        return result
    }

    /// Calls `body` with every member, in no particular order (no array is built).
    func forEach(_ body: (Element) -> Void) {
        if firstID != nil, let firstMember { body(firstMember) }
        for member in rest.values { body(member) }
    }

    /// Tracks `member` under `id`, replacing one tracked under the same id. Returns `false` when it replaced one.
    @discardableResult
    mutating func insert(_ member: Element, id: ObjectIdentifier) -> Bool {
        if firstID == id {
            firstMember = member
            return false
        }
        if firstID == nil, rest.isEmpty || rest[id] == nil {
            firstID = id
            firstMember = member
            return true
        }
        return rest.updateValue(member, forKey: id) == nil
    }

    /// Forgets the member tracked under `id`; `false` if there was none.
    @discardableResult
    mutating func remove(id: ObjectIdentifier) -> Bool {
        if firstID == id {
            firstID = nil
            firstMember = nil
            return true
        }
        guard !rest.isEmpty else { return false }
        return rest.removeValue(forKey: id) != nil
    }
}

extension IdentityTable: Sendable where Element: Sendable {}

extension IdentityTable where Element == any CancellableOperation {
    /// Tracks `operation` under its own identity; `false` if it was tracked already.
    @discardableResult
    mutating func insert(_ operation: any CancellableOperation) -> Bool {
        insert(operation, id: ObjectIdentifier(operation))
    }

    /// Forgets `operation`; `false` if it was not tracked.
    @discardableResult
    mutating func remove(_ operation: any CancellableOperation) -> Bool {
        remove(id: ObjectIdentifier(operation))
    }
}
