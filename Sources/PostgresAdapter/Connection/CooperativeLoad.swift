import Synchronization

/// Signs that other Postgres work of this process wants a cooperative-pool thread now: a query's answer wait reads
/// them to decide whether a short look at its socket before parking (``PostgresConnection/answerSpin``) is worth
/// holding a cooperative thread.
///
/// Process-wide, not per pool, on purpose: the cooperative pool is the process's (a thread per core), so a look
/// that holds a thread delays every pool's queries alike. A count per pool would let a query of one pool look while
/// another pool's lessees wait for the very thread it holds (Docs/Architecture.md, "Load hints").
final class CooperativeLoad: Sendable {
    /// The one count of the process.
    static let postgres = CooperativeLoad()

    /// Connections leased from every pool: a leased connection counts while its lessee is queued for a
    /// cooperative thread, when no query of it is on the wire yet.
    private let leases = Atomic<Int>(0)
    /// Operations collecting a query's answers, from the first look at the socket after the send to ReadyForQuery
    /// (parked, looking, or reading rows). Counting only the queries parked for their *first* answer (the rule
    /// before) let most queries of a 64-task load look, because the others were reading or between a lease and a
    /// send at that instant: looks and yields for answers that came later than the spin.
    private let answerWaits = Atomic<Int>(0)

    private init() {}

    /// A pool handed out a connection (a lessee's, or a driver's of shared statements).
    func leaseTaken() { leases.add(1, ordering: .relaxed) }
    /// That connection went back.
    func leaseReturned() { leases.subtract(1, ordering: .relaxed) }
    /// An operation began collecting a query's answers.
    func answersAwaited() { answerWaits.add(1, ordering: .relaxed) }
    /// It has them all (or failed).
    func answersCollected() { answerWaits.subtract(1, ordering: .relaxed) }

    /// Whether another query of this process may be in flight or about to be: another operation collects answers
    /// (the caller counts itself), or more than one connection is leased (its lessee may be queued for a
    /// cooperative thread, with nothing on the wire yet). Either way a look would hold a thread other work needs.
    var othersAreBusy: Bool {
        answerWaits.load(ordering: .relaxed) > 1 || leases.load(ordering: .relaxed) > 1
    }
}
