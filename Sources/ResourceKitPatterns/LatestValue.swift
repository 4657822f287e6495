import ResourceKit

/// The stale-result guard: a value that only the latest generation of work may set.
///
/// Each piece of work takes a ``Ticket`` with ``begin()`` before it starts; taking a ticket supersedes every
/// earlier one. ``commit(_:for:)`` stores the value only if its ticket is still the latest, so a slow
/// superseded result (from work that ignored cancellation, or an old callback API that answers late) can
/// never overwrite a newer one. ``LatestTask`` commits for you; use this type directly when the work is
/// started some other way.
///
/// ```swift
/// let ticket = search.begin()
/// let hits = try await legacyIndex.lookup(term)   // may return long after a newer search
/// search.commit(hits, for: ticket)                // dropped if a newer search began
/// ```
public final class LatestValue<Value: Sendable>: Sendable {
    /// A claim on the right to commit, valid until the next ``LatestValue/begin()``.
    public struct Ticket: Sendable, Hashable, Comparable {
        /// The generation this ticket belongs to; generations only grow.
        public let generation: UInt64
        public static func < (lhs: Ticket, rhs: Ticket) -> Bool { lhs.generation < rhs.generation }
    }

    /// A committed value and the generation that produced it.
    public struct Committed: Sendable {
        public let value: Value
        public let generation: UInt64
    }

    private struct State {
        var latestTicket: UInt64 = 0
        var committed: Committed?
        var dropped = 0
    }

    private let state = Locked(State())
    private let broadcast = Broadcast<Committed>()

    /// Creates an empty guard.
    public init() {}

    /// Starts a new generation and returns its ticket; every earlier ticket becomes stale.
    public func begin() -> Ticket {
        state.withLock { state in
            state.latestTicket += 1
            return Ticket(generation: state.latestTicket)
        }
    }

    /// Starts generation `generation`, or a later one if a later generation already began (the caller
    /// numbered its generations itself, and two may begin out of order): a ticket for an older generation is
    /// stale at once. Used by ``LatestTask``, which takes tickets outside its lock.
    func begin(atLeast generation: UInt64) -> Ticket {
        state.withLock { state in
            state.latestTicket = max(state.latestTicket, generation)
            return Ticket(generation: generation)
        }
    }

    /// Stores `value` if `ticket` is still the latest; returns whether it was stored. Stale commits are
    /// counted in ``droppedCount`` and otherwise ignored. Non-blocking, any thread.
    @discardableResult
    public func commit(_ value: Value, for ticket: Ticket) -> Bool {
        let committed = Committed(value: value, generation: ticket.generation)
        let stored = state.withLock { state -> Bool in
            guard ticket.generation == state.latestTicket, (state.committed?.generation ?? 0) < ticket.generation else {
                state.dropped += 1
                return false
            }
            state.committed = committed
            return true
        }
        if stored { broadcast.yield(committed) }
        return stored
    }

    /// `true` while `ticket` is the latest one (its commit would be stored).
    public func isCurrent(_ ticket: Ticket) -> Bool {
        state.withLock { $0.latestTicket == ticket.generation }
    }

    /// The latest committed value, if any.
    public var value: Value? { state.withLock { $0.committed?.value } }

    /// The latest committed value with its generation.
    public var committed: Committed? { state.withLock { $0.committed } }

    /// How many commits were refused as stale.
    public var droppedCount: Int { state.withLock { $0.dropped } }

    /// Every value committed from now on, in order. The stream ends when its consumer's task is cancelled
    /// (the subscription is then removed).
    public func updates(bufferingNewest limit: Int = 64) -> AsyncStream<Committed> {
        broadcast.subscribe(bufferingNewest: limit)
    }
}
