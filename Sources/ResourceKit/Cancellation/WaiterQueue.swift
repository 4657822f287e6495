/// Waiters parked in arrival order under their owner's lock: the one queue behind every cancellable wait that is
/// not a single ``CancellationCell`` (a pool's queued leases, its shared statements, a ``OneShotEvent``'s
/// waiters). A value: its owner holds it inside its own state machine and lock, decides there, and resumes what it
/// is handed after releasing the lock (Docs/Architecture.md, "State machines and their owners").
///
/// Three promises, each tested without I/O (`WaiterQueueTests`):
/// - **An id made before the handler.** A waiter is numbered before its task's cancellation handler is installed,
///   so a cancel can name it whether or not it has parked yet.
/// - **Cancel before ask is remembered.** A cancel that reaches a waiter that has not asked yet is kept, and the
///   waiter finds it when it asks (``takeCancellation(of:)``), instead of parking for ever.
/// - **Every waiter is handed out exactly once.** Whatever returns a waiter (``popFirst()``, ``popFirst(_:)``,
///   ``cancel(_:reason:asked:)``, ``removeAll()``) removes it in the same step, so the owner resumes it without
///   asking whether it is still there.
///
/// Whether a waiter has asked is the owner's to say (`asked`): it marks it under the same lock as the ask, because
/// a waiter served at once never parks, and the queue must not keep a reason for it.
package struct WaiterQueue<Waiter> {
    package typealias ID = UInt64

    /// The parked waiters, first first, from `head` on. The slots before `head` were handed out (emptied, so that
    /// nothing they held stays alive) and are dropped once they are most of the array: a pop moves nothing, where an
    /// array's `removeFirst` moved every waiter behind it.
    @usableFromInline var slots: [(id: ID, waiter: Waiter)?] = []
    @usableFromInline var head = 0
    /// Cancels that reached a waiter before it asked; empty but for that instant.
    @usableFromInline var cancelledBeforeAsking: [ID: CancellationReason] = [:]

    package init() {}

    @inlinable package var isEmpty: Bool { head == slots.count }
    @inlinable package var count: Int { slots.count - head }
    /// The parked waiters, first first (for inspection: they stay parked).
    package var waiters: [Waiter] { slots[head...].map { $0!.waiter } }
    /// Reasons kept for waiters that have not asked yet (for tests: `0` once every waiter asked).
    package var remembered: Int { cancelledBeforeAsking.count }

    /// Waiter `id` asks: the reason of a cancel that reached it before, if any (it must not park then; the reason is
    /// forgotten here), else `nil`.
    @inlinable package mutating func takeCancellation(of id: ID) -> CancellationReason? {
        guard !cancelledBeforeAsking.isEmpty else { return nil }
        return cancelledBeforeAsking.removeValue(forKey: id)
    }

    /// Parks `waiter` last.
    @inlinable package mutating func append(_ waiter: Waiter, id: ID) {
        slots.append((id, waiter))
    }

    /// Parks `waiters` first, in their order (work that goes back to the front of the queue).
    package mutating func prepend(_ waiters: [(id: ID, waiter: Waiter)]) {
        compact(force: true)
        slots.insert(contentsOf: waiters.map { Optional($0) }, at: 0)
    }

    /// The first waiter, which leaves the queue.
    @inlinable package mutating func popFirst() -> Waiter? {
        guard head < slots.count else { return nil }
        let entry = slots[head].take()
        head += 1
        compact(force: false)
        return entry?.waiter
    }

    /// Up to `count` waiters from the front, which leave the queue.
    package mutating func popFirst(_ count: Int) -> [Waiter] {
        let taken = min(max(0, count), self.count)
        var waiters: [Waiter] = []
        waiters.reserveCapacity(taken)
        for index in head..<(head + taken) { waiters.append(slots[index].take()!.waiter) }
        head += taken
        compact(force: false)
        return waiters
    }

    /// Every parked waiter, first first; the queue is left empty.
    package mutating func removeAll() -> [Waiter] {
        defer {
            slots = []
            head = 0
        }
        return waiters
    }

    /// Drops the handed-out slots: always when `force`, else once the queue is empty (keeping the array's storage)
    /// or once they are more than half of a long array.
    @inlinable mutating func compact(force: Bool) {
        if head == slots.count {
            slots.removeAll(keepingCapacity: true)
            head = 0
        } else if force || (head >= 32 && head * 2 >= slots.count) {
            slots.removeFirst(head)
            head = 0
        }
    }

    /// What a cancel of one waiter found.
    package enum CancelOutcome {
        /// It was parked and has left the queue: resume it with the reason's error.
        case removed(Waiter)
        /// It has not asked yet: the reason is kept for its ask (the first reason counts).
        case remembered
        /// It asked and is not parked: it was handed out before the cancel (or was never parked here).
        case notParked
    }

    /// Waiter `id` was cancelled. `asked`: it has asked already (marked by the owner under the lock it asks under).
    package mutating func cancel(_ id: ID, reason: CancellationReason, asked: Bool) -> CancelOutcome {
        guard asked else {
            if cancelledBeforeAsking[id] == nil { cancelledBeforeAsking[id] = reason }
            return .remembered
        }
        guard let index = slots[head...].firstIndex(where: { $0?.id == id }) else { return .notParked }
        let entry = slots.remove(at: index)!
        compact(force: false)
        return .removed(entry.waiter)
    }
}

extension WaiterQueue: Sendable where Waiter: Sendable {}
extension WaiterQueue.CancelOutcome: Sendable where Waiter: Sendable {}

/// The continuation a waiter that is resumed exactly once suspends on: a cell's waiter, the Postgres pool's queued
/// lease. The state machine that owns it resumes it once, so it is an unsafe continuation: a checked one allocates a
/// second object per wait (its canary) and frees it again. Debug and release builds alike use it, so the test suite
/// runs what ships. The sanitizer passes (`Scripts/test --sanitize=thread|address`) define
/// `RESOURCEKIT_CHECKED_SYNCHRONIZATION` and get the checked one: it traps on a resume the machine should have made
/// impossible, and the thread sanitizer sees the resume happen before the resumed task runs (with an unsafe one it
/// reports a race on every wait). Decided here only, for every module (Docs/Architecture.md, "State machines and
/// their owners").
#if RESOURCEKIT_CHECKED_SYNCHRONIZATION
@usableFromInline package typealias WaiterContinuation<T> = CheckedContinuation<T, any Error>
#else
@usableFromInline package typealias WaiterContinuation<T> = UnsafeContinuation<T, any Error>
#endif

/// Suspends the caller on a ``WaiterContinuation`` handed to `body`, which must arrange for it to be resumed exactly
/// once.
@inlinable
package func suspendOnWaiter<T>(_ body: (WaiterContinuation<T>) -> Void) async throws -> T {
    #if RESOURCEKIT_CHECKED_SYNCHRONIZATION
    try await withCheckedThrowingContinuation(body)
    #else
    try await withUnsafeThrowingContinuation(body)
    #endif
}
