import Testing

@testable import ResourceKit

/// ``LiveTable`` as a pure value, against a dictionary doing the same: insertions refuse a second member for an
/// object, removals take only the member asked for, and the probe runs stay whole after any removal.
@Suite struct LiveTableTests {
    final class Member: Sendable {
        let number: Int
        init(_ number: Int) { self.number = number }
    }

    @Test func anObjectHasOneMemberAtATime() {
        var table = LiveTable<Member>()
        let object = Member(0)
        let first = Member(1)
        let second = Member(2)
        let id = ObjectIdentifier(object)
        #expect(table.member(for: id) == nil)
        var outcomes = [table.insert(first, for: id), table.insert(second, for: id)]
        #expect(outcomes == [true, false])
        #expect(table.member(for: id) === first)
        // Only the member that is recorded is removed: a stale removal leaves a later registration alone.
        outcomes = [table.remove(id, ifMember: second)]
        #expect(table.count == 1)
        outcomes.append(table.remove(id, ifMember: first))
        #expect(table.count == 0)
        outcomes.append(table.insert(second, for: id))
        #expect(outcomes == [false, true, true])
        #expect(table.member(for: id) === second)
    }

    /// Thousands of random insertions and removals over a few hundred objects (the table grows and its probe runs
    /// collide), each checked against a dictionary: after every step the table finds exactly what the dictionary
    /// holds. Broken once by leaving a hole on removal instead of shifting the run back: look-ups past it failed.
    @Test func randomInsertionsAndRemovalsMatchADictionary() {
        var generator = SplitMix64(seed: 0x5EED)
        let objects = (0..<300).map(Member.init)
        let members = (0..<300).map { Member(1_000 + $0) }
        var table = LiveTable<Member>()
        var model: [ObjectIdentifier: Member] = [:]
        for step in 0..<20_000 {
            let index = Int(generator.next() % UInt64(objects.count))
            let object = ObjectIdentifier(objects[index])
            if generator.next() % 3 == 0 {
                let removed = table.remove(object, ifMember: members[index])
                #expect(removed == (model.removeValue(forKey: object) != nil), "step \(step)")
            } else {
                let inserted = table.insert(members[index], for: object)
                #expect(inserted == (model[object] == nil), "step \(step)")
                model[object] = members[index]
            }
            if step % 500 == 0 || step > 19_900 {
                #expect(table.count == model.count)
                for candidate in objects {
                    let id = ObjectIdentifier(candidate)
                    #expect(table.member(for: id) === model[id], "step \(step)")
                }
                let read = table.reading(\.number).sorted()
                #expect(read == model.values.map(\.number).sorted())
            }
        }
    }
}

/// A small deterministic generator (SplitMix64), so that a failure replays.
private struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
