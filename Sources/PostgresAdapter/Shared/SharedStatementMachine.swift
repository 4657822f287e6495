import ResourceKit

/// The decisions behind ``PostgresPool/execute(_:_:)`` as a value: which statements wait, which driver sends
/// which of them on its connection, when a driver starts or stops, what a cancel does, which statement is sent
/// again. Tested without I/O (`SharedStatementMachineTests`); the pool performs the actions after releasing the
/// lock that guards the machine (Docs/Architecture.md, "Shared statements").
///
/// A *driver* is a task of the pool that leases a connection and sends what is queued, up to `depth`
/// statements at a time, each with its own sync (one statement's error touches no other). `Waiter` is what a
/// caller parks on; `Wire` names a driver's batch on the wire (its connection and query), for a cancel.
///
/// Every waiter leaves the machine in the step that hands it out (resumed, refused, cancelled), so the pool
/// resumes each exactly once without asking whether it is still there. Queued statements park in a `WaiterQueue`
/// (the core's one queue of cancellable waiters, as the pool's leases do), which also keeps a cancel that reached a
/// statement before it was submitted.
struct SharedStatementMachine<Waiter, Wire> {
    typealias EntryID = UInt64
    typealias DriverID = UInt64

    struct Entry {
        let id: EntryID
        let statement: PostgresStatement
        let waiter: Waiter
        /// How often it was sent again after a cancel meant for another statement stopped it.
        var resends = 0
    }

    /// The most times a statement is sent again after cancels meant for others stopped it; past that its caller
    /// gets the `57014`. With cancels sent only for a batch's head (see ``cancel(_:reason:submitted:)``) and a
    /// statement sent again at the head of its next batch, a second stop is already unlikely.
    static var maxResends: Int { 3 }

    struct Sent {
        let entry: Entry
        let driver: DriverID
    }

    struct Driver {
        /// Between taking batches: a statement that arrives now needs no new driver.
        var idle = true
        /// The batch taken and not written yet (the driver may wait for its connection's earlier cancels to
        /// settle first): a statement cancelled now leaves it and is never written.
        var taken: [Entry] = []
        /// The batch on the wire, once sent.
        var wire: Wire?
        /// A cancel went to the server during the current batch: a `57014` of a statement whose caller is still
        /// there may be that cancel's (sent for the head, it can land on a later statement).
        var cancelSent = false
        /// The batch's statements in the order they were written, and how many have their outcome: the first
        /// without one (the *head*) is the one the server runs, or is about to.
        var order: [EntryID] = []
        var answered = 0
        /// Statements whose caller left while they were on the wire: each is cancelled on the server once it is
        /// the head (a cancel sent earlier would stop the statement running before it instead).
        var cancelWanted: Set<EntryID> = []

        var head: EntryID? { answered < order.count ? order[answered] : nil }
        var headWantsCancel: Bool { head.map(cancelWanted.contains) ?? false }
    }

    /// The most statements one driver sends at a time.
    let depth: Int
    /// The most drivers at once (the pool's connections).
    let maxDrivers: Int
    private(set) var pending = WaiterQueue<Entry>()
    private var sent: [EntryID: Sent] = [:]
    private var drivers: [DriverID: Driver] = [:]
    private var nextDriver: DriverID = 0
    private(set) var closed = false

    init(depth: Int, maxDrivers: Int) {
        self.depth = max(1, depth)
        self.maxDrivers = max(1, maxDrivers)
    }

    /// Drivers running (leasing, sending, or between batches).
    var driverCount: Int { drivers.count }
    /// Statements sent and not yet answered.
    var sentCount: Int { sent.count }

    enum SubmitAction: Equatable {
        /// Queued; a driver will take it.
        case queued
        /// Queued; start this driver (it leases a connection and takes what is queued).
        case startDriver(DriverID)
        /// The pool is shut down.
        case refuseClosed
        /// The statement was cancelled before it was submitted.
        case cancelled(CancellationReason)
    }

    /// A caller submits a statement.
    mutating func submit(_ entry: Entry) -> SubmitAction {
        if let reason = pending.takeCancellation(of: entry.id) { return .cancelled(reason) }
        if closed { return .refuseClosed }
        pending.append(entry, id: entry.id)
        return startDriverIfNeeded().map(SubmitAction.startDriver) ?? .queued
    }

    /// A new driver when statements wait, no driver is idle to take them, and a connection is left.
    private mutating func startDriverIfNeeded() -> DriverID? {
        guard !pending.isEmpty, drivers.count < maxDrivers, !drivers.values.contains(where: \.idle) else { return nil }
        nextDriver += 1
        drivers[nextDriver] = Driver()
        return nextDriver
    }

    enum TakeAction {
        /// Send these statements, in this order.
        case send([Entry])
        /// Stop: return the connection. When `replacement` is set, start it (statements wait, and this driver
        /// leaves its connection to a lessee queued in the pool).
        case stop(replacement: DriverID?)
    }

    /// Driver `driver` holds a connection and asks for its next batch. `lesseesWaiting`: a task queues in the pool
    /// for a connection of its own; the driver then stops after its batch, so that shared statements never
    /// starve ``PostgresPool/withConnection(_:)`` (a replacement queues behind that lessee).
    mutating func takeBatch(_ driver: DriverID, lesseesWaiting: Bool) -> TakeAction {
        guard drivers[driver] != nil else { return .stop(replacement: nil) }
        if pending.isEmpty || closed || lesseesWaiting { return .stop(replacement: driverStopped(driver)) }
        let batch = pending.popFirst(depth)
        drivers[driver] = Driver(idle: false, taken: batch)
        return .send(batch)
    }

    /// Driver `driver` writes its batch now (called under the connection's lock, in the step that hands the
    /// statements to libpq): returns the statements still wanted, in order. A statement cancelled before this
    /// step left the batch and is never written; from this step on, a cancel reaches it on the server.
    mutating func write(_ driver: DriverID) -> [Entry] {
        guard var record = drivers[driver] else { return [] }
        let batch = record.taken
        record.taken = []
        record.order = batch.map(\.id)
        for entry in batch { sent[entry.id] = Sent(entry: entry, driver: driver) }
        drivers[driver] = record
        return batch
    }

    /// Driver `driver`'s batch is on the wire as `wire` (a cancel can name it from now on). Returns whether to
    /// cancel it at once: its head's caller left while it was being sent.
    mutating func batchSent(_ driver: DriverID, as wire: Wire) -> Bool {
        guard var record = drivers[driver] else { return false }
        record.wire = wire
        let cancelNow = record.headWantsCancel
        if cancelNow { record.cancelSent = true }
        drivers[driver] = record
        return cancelNow
    }

    enum FinishAction {
        /// Resume the waiter with the outcome.
        case resume(Waiter, Result<PostgresResult, PostgresError>)
        /// The statement was stopped by a cancel this pool sent for another one: it is queued again, at the
        /// front; start `driver` if set.
        case sentAgain(startDriver: DriverID?)
        /// Its caller left already (cancelled): nothing to do.
        case none
    }

    /// Statement `id` of driver `driver`'s batch has its outcome (its sync; outcomes come in the batch's order).
    /// Returns what to do with it, and the batch to cancel now when the next statement, now the head, is one
    /// whose caller left.
    ///
    /// A `57014` is sent again only when a cancel of this pool can have caused it: a cancel went out in this batch
    /// (always for the head, so for a statement before this one: a cancel's own target has no caller left), since
    /// PostgreSQL cancels whatever runs when the cancel lands; and the server does not report it as a
    /// `statement_timeout`. Any other `57014` (a timeout, someone else's cancel with none of the pool's out) goes to
    /// its caller as it is.
    mutating func finished(
        _ driver: DriverID, _ id: EntryID, _ outcome: Result<PostgresResult, PostgresError>
    ) -> (action: FinishAction, cancel: Wire?) {
        var cancel: Wire?
        var stoppedByOurCancel = false
        if var record = drivers[driver] {
            record.answered += 1
            record.cancelWanted.remove(id)
            stoppedByOurCancel = record.cancelSent
            if record.headWantsCancel, let wire = record.wire {
                record.cancelSent = true
                cancel = wire
            }
            drivers[driver] = record
        }
        guard let sentRecord = sent.removeValue(forKey: id) else { return (.none, cancel) }
        if case .failure(let error) = outcome, error.isQueryCanceled, !error.isStatementTimeout, stoppedByOurCancel,
            !closed, sentRecord.entry.resends < Self.maxResends
        {
            var again = sentRecord.entry
            again.resends += 1
            pending.prepend([(again.id, again)])
            return (.sentAgain(startDriver: startDriverIfNeeded()), cancel)
        }
        return (.resume(sentRecord.entry.waiter, outcome), cancel)
    }

    /// Whether driver `driver`'s batch should get its cancel again (one that did not stop it: behind a balancer
    /// it may have reached another server): only while its head is a statement whose caller left.
    func cancelStillWanted(_ driver: DriverID) -> Bool {
        drivers[driver]?.headWantsCancel ?? false
    }

    /// Driver `driver`'s batch ended: returns the waiters of its statements still unanswered (the connection
    /// failed), which get the failure. The driver is idle until it takes its next batch.
    mutating func batchEnded(_ driver: DriverID) -> [Waiter] {
        var failed: [Waiter] = []
        for (id, record) in sent where record.driver == driver {
            sent[id] = nil
            failed.append(record.entry.waiter)
        }
        if let record = drivers[driver] {
            pending.prepend(record.taken.map { ($0.id, $0) })  // never written (the batch ended before its write)
            drivers[driver] = Driver()
        }
        return failed
    }

    /// Driver `driver`'s batch never reached libpq (its connection was found broken first): its statements go
    /// back to the front of the queue, in order, for another driver.
    mutating func batchNotSent(_ driver: DriverID) {
        guard var record = drivers[driver] else { return }
        let back = record.order.compactMap { sent.removeValue(forKey: $0)?.entry } + record.taken
        record.taken = []
        record.order = []
        drivers[driver] = record
        pending.prepend(back.map { ($0.id, $0) })
    }

    /// Driver `driver` stopped (nothing queued, a lessee waits, the pool closed, or its connection failed).
    /// Returns a replacement to start when statements still wait and no other driver is idle to take them.
    mutating func driverStopped(_ driver: DriverID) -> DriverID? {
        drivers[driver] = nil
        return closed ? nil : startDriverIfNeeded()
    }

    /// Driver `driver` could not lease a connection (the pool was shut down, or the server cannot be reached): it
    /// is gone, and so, when no other driver is left to take them, are the queued statements (their waiters get
    /// the lease's error, as the pool's queued lessees do).
    mutating func driverFailed(_ driver: DriverID) -> [Waiter] {
        drivers[driver] = nil
        guard drivers.isEmpty else { return [] }
        return pending.removeAll().map(\.waiter)
    }

    enum CancelAction {
        /// The statement was queued, or taken into a batch not written yet: it left; throw the reason's error to
        /// the waiter. It is never sent.
        case resume(Waiter)
        /// The statement is the head of a batch on the wire: throw to the waiter now, and cancel `wire` on the
        /// server.
        case resumeAndCancel(Waiter, Wire)
        /// Written, but not the head yet (or its batch's query id not known yet): throw to the waiter now; its
        /// outcome is dropped, and the cancel goes out when it becomes the head (``batchSent(_:as:)``,
        /// ``finished(_:_:_:)``): PostgreSQL cancels whatever runs when the cancel lands.
        case resumeOnly(Waiter)
        /// Already answered, or not submitted yet (its reason is kept for the submit).
        case none
    }

    /// The caller of statement `id` was cancelled. `submitted`: whether it submitted already (else the reason is
    /// kept until it does, and it is refused then).
    mutating func cancel(_ id: EntryID, reason: CancellationReason, submitted: Bool) -> CancelAction {
        switch pending.cancel(id, reason: reason, asked: submitted) {
        case .removed(let entry): return .resume(entry.waiter)
        case .remembered: return .none
        case .notParked: break
        }
        for (driverID, var driver) in drivers {
            guard let index = driver.taken.firstIndex(where: { $0.id == id }) else { continue }
            let entry = driver.taken.remove(at: index)
            drivers[driverID] = driver
            return .resume(entry.waiter)
        }
        if let record = sent.removeValue(forKey: id), var driver = drivers[record.driver] {
            // Its outcome, when it comes, goes nowhere (``finished(_:_:_:)`` no longer knows it).
            driver.cancelWanted.insert(id)
            defer { drivers[record.driver] = driver }
            guard driver.head == id, let wire = driver.wire else { return .resumeOnly(record.entry.waiter) }
            driver.cancelSent = true
            return .resumeAndCancel(record.entry.waiter, wire)
        }
        return .none
    }

    /// The pool shuts down: every queued statement's waiter (they get ``PostgresError/Code/poolClosed``); sent
    /// ones still get their outcome, and drivers stop after their batch.
    mutating func close() -> [Waiter] {
        closed = true
        return pending.removeAll().map(\.waiter)
    }
}

extension SharedStatementMachine: Sendable where Waiter: Sendable, Wire: Sendable {}
extension SharedStatementMachine.Entry: Sendable where Waiter: Sendable {}
extension SharedStatementMachine.Sent: Sendable where Waiter: Sendable {}
extension SharedStatementMachine.Driver: Sendable where Waiter: Sendable, Wire: Sendable {}
