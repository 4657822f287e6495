/// The registry's ledger of live resources: each registered resource object's handle (`Member`), found by the
/// object's identity (one registration per object at a time).
///
/// An open-addressing table (linear probing, at most half full, deletion by backward shift) keyed by the object's
/// address with a multiplicative hash: an insertion and a removal per registered resource, on the path every
/// scope takes, without `Hasher`'s SipHash or a dictionary's generic storage (Docs/Architecture.md, "The cost of
/// a scope"). It holds each member unretained: a handle leaves the table before it is deallocated (its close, or
/// its deinit's leak report, removes it under the registry's lock, which every reader holds), so every member a
/// reader finds is alive; a reader that meets a handle in its deinit reads its immutable facts and state while the
/// deinit waits for that lock. A value without I/O: `LiveTableTests` checks it against a dictionary.
struct LiveTable<Member: AnyObject & Sendable>: Sendable {
    /// One slot: `key == 0` is empty (no object lives at address 0).
    private struct Slot: Sendable {
        var key: UInt = 0
        var member: Unmanaged<Member>?
    }

    private var slots: ContiguousArray<Slot> = []
    /// `slots.count - 1`: the table's size is a power of two (or zero before the first insertion).
    private var mask = 0
    /// How far to shift the 64-bit product for an index: `64 - log2(slots.count)`.
    private var shift = 64
    private(set) var count = 0

    init() {}

    private static func key(_ object: ObjectIdentifier) -> UInt { UInt(bitPattern: object) }

    /// Fibonacci hashing of the address: its low bits (alignment) carry no information, the product's top bits do.
    private func home(_ key: UInt) -> Int {
        Int(truncatingIfNeeded: (UInt64(key) &* 0x9E37_79B9_7F4A_7C15) >> UInt64(shift))
    }

    /// The member recorded for `object`, if any.
    func member(for object: ObjectIdentifier) -> Member? {
        guard let index = index(of: Self.key(object)) else { return nil }
        return slots[index].member?.takeUnretainedValue()
    }

    private func index(of key: UInt) -> Int? {
        guard count > 0 else { return nil }
        var index = home(key)
        while true {
            let slot = slots[index]
            if slot.key == key { return index }
            if slot.key == 0 { return nil }
            index = (index + 1) & mask
        }
    }

    /// Records `member` for `object`; `false`, changing nothing, if the object has a member here already.
    mutating func insert(_ member: Member, for object: ObjectIdentifier) -> Bool {
        if (count + 1) * 2 > slots.count { grow() }
        let key = Self.key(object)
        var index = home(key)
        while slots[index].key != 0 {
            if slots[index].key == key { return false }
            index = (index + 1) & mask
        }
        slots[index] = Slot(key: key, member: .passUnretained(member))
        count += 1
        return true
    }

    /// Removes `object`'s entry if it is `member` (never a later registration of the same object). Returns whether
    /// it removed one.
    @discardableResult
    mutating func remove(_ object: ObjectIdentifier, ifMember member: Member) -> Bool {
        guard let found = index(of: Self.key(object)),
            slots[found].member?.toOpaque() == Unmanaged.passUnretained(member).toOpaque()
        else { return false }
        // Backward shift: move each later member of the probe run into the hole when its home allows it, so that
        // look-ups never need tombstones.
        var hole = found
        var next = (hole + 1) & mask
        while slots[next].key != 0 {
            let wanted = home(slots[next].key)
            // `next` may fill the hole when its home is not strictly between the hole and `next`, cyclically.
            if (next - wanted) & mask >= (next - hole) & mask {
                slots[hole] = slots[next]
                hole = next
            }
            next = (next + 1) & mask
        }
        slots[hole] = Slot()
        count -= 1
        return true
    }

    /// `read(member)` for every member, in no particular order.
    func reading<Value>(_ read: (Member) -> Value) -> [Value] {
        var values: [Value] = []
        values.reserveCapacity(count)
        for slot in slots where slot.key != 0 {
            if let member = slot.member { values.append(member._withUnsafeGuaranteedRef(read)) }
        }
        return values
    }

    private mutating func grow() {
        let old = slots
        let size = Swift.max(16, old.count * 2)
        slots = ContiguousArray(repeating: Slot(), count: size)
        mask = size - 1
        shift = 64 - size.trailingZeroBitCount
        for slot in old where slot.key != 0 {
            var index = home(slot.key)
            while slots[index].key != 0 { index = (index + 1) & mask }
            slots[index] = slot
        }
    }
}
