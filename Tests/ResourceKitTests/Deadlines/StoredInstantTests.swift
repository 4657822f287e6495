import Testing

@testable import ResourceKit

/// ``StoredInstant`` as a value, and the fixed layouts it and the boxed deadline reason exist for.
@Suite struct StoredInstantTests {
    @Test func anInstantComesBackExactlyAndKeepsItsOrder() {
        let now = ContinuousClock.now
        let later = now + .nanoseconds(1)
        let earlier = now - .seconds(3_600)
        for instant in [now, later, earlier, now + .seconds(86_400 * 365)] {
            #expect(StoredInstant(instant).instant == instant)
        }
        #expect(StoredInstant(earlier) < StoredInstant(now))
        #expect(StoredInstant(now) < StoredInstant(later))
        #expect(StoredInstant(later) - StoredInstant(now) == .nanoseconds(1))
        #expect(StoredInstant(now) == StoredInstant(now))
        let none: ContinuousClock.Instant? = nil
        #expect(none.stored == nil)
        #expect(Optional(now).stored.instant == now)
    }

    /// `ContinuousClock.Instant` is not frozen: a value holding it inline has a layout known only at run time,
    /// and every copy of it goes through run-time calls. These sizes are fixed at compile time because the
    /// instant is boxed (`CancellationReason`) or stored as a `Duration` (`StoredInstant`).
    @Test func reasonsAndStoredInstantsHaveFixedSmallLayouts() {
        #expect(MemoryLayout<CancellationReason>.size == MemoryLayout<Int>.size)
        #expect(MemoryLayout<CancellationReason?>.size == MemoryLayout<Int>.size)
        #expect(MemoryLayout<StoredInstant>.size == MemoryLayout<Duration>.size)
        let reason = CancellationReason.deadlineExceeded(.now)
        if case .deadlineExceeded(let instant) = reason {
            #expect(instant <= .now)
        } else {
            Issue.record("the boxed case reads back")
        }
    }

    /// ``StoredInstant/now`` reads the clock directly and gives exactly the instant `ContinuousClock.now` would:
    /// never before a reading taken before it, never after one taken after it. Broken once by moving the raw
    /// clock's origin a microsecond: the bounds failed.
    @Test func nowIsTheClocksOwnInstant() {
        #if os(Linux)
        #expect(StoredInstant.readsTheClockDirectly)
        #endif
        for _ in 0..<1_000 {
            let before = ContinuousClock.now
            let now = StoredInstant.now
            let after = ContinuousClock.now
            #expect(before <= now.instant && now.instant <= after)
            #expect(StoredInstant(before) <= now && now <= StoredInstant(after))
        }
    }
}
