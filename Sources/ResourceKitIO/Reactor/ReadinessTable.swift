import CSystemShims

import ResourceKit
#if canImport(Glibc)
import Glibc
#endif

/// The reactor's bookkeeping of which waiter waits on which descriptor, as a value that decides and never
/// acts: every method returns the kernel call to make (a ``Request``), which the reactor performs *after*
/// releasing its lock, then reports back with ``finish(_:result:)``. Tested without epoll.
///
/// Rules:
/// - Every kernel registration carries a registration id, new for every `EPOLL_CTL_ADD`: an event for a
///   descriptor that was closed and whose number was reused is recognised as stale and never reaches a waiter.
/// - Registrations are one-shot. After an event the kernel registration is disarmed; it is re-armed (`MOD`)
///   only when waiters remain.
/// - At most one kernel call per descriptor is in flight. A change made meanwhile is picked up when that
///   call finishes (``finish(_:result:)`` returns the next call), so calls on one descriptor never overtake
///   each other although none is made under the lock.
/// - Removing a waiter (cancellation) makes no kernel call: the registration stays armed and harmless (its
///   event finds no waiter), the next wait on the descriptor re-arms it, ``descriptorWillClose(fd:)`` deletes it.
/// - A new waiter always costs one call (`ADD` or `MOD`): the kernel's answer tells whether the descriptor
///   was closed and its number reused under earlier waiters (`ENOENT`), which are then evicted.
struct ReadinessTable<Waiter> {
    enum CtlOperation: Int32, Sendable {
        case add = 1
        case delete = 2
        case modify = 3
    }

    /// One `epoll_ctl` to make, outside the lock.
    struct Request: Equatable, Sendable {
        var op: CtlOperation
        var fd: Int32
        var events: UInt32
        var registration: UInt64
        /// The waiters (and contenders) whose registration this call confirms.
        var covers = Covers()
    }

    /// The ids a kernel call confirms: the reader's and the writer's inline, contenders (rare) in an array, so that
    /// the call of an ordinary wait allocates nothing.
    struct Covers: Equatable, Sendable {
        var reader: UInt64?
        var writer: UInt64?
        var contenders: [UInt64] = []

        func contains(_ id: UInt64) -> Bool {
            reader == id || writer == id || contenders.contains(id)
        }
    }

    /// The waiters an event resumes: at most a reader and a writer, held inline (no array per event).
    struct Ready: Sequence {
        var reader: (Waiter, IOEvents)?
        var writer: (Waiter, IOEvents)?

        var isEmpty: Bool { reader == nil && writer == nil }

        func makeIterator() -> IndexingIterator<[(Waiter, IOEvents)]> {
            // For tests and rare callers; the reactor's loop reads `reader` and `writer`.
            ([reader, writer].compactMap { $0 }).makeIterator()
        }
    }

    /// A waiter that must fail, and why.
    typealias Failure = (waiter: Waiter, error: ResourceKitError)

    /// What the kernel holds for an entry, as far as the table knows.
    enum Kernel: Equatable, Sendable {
        case unregistered
        case armed(UInt32)
        /// Registered, but its one-shot event fired: nothing arrives until the next `MOD`.
        case disarmed
    }

    struct Slot {
        var id: UInt64
        var waiter: Waiter
        /// A kernel call that included this waiter succeeded.
        var confirmed = false
    }

    /// A waiter that asked for a slot another (confirmed) waiter holds: the next kernel answer decides
    /// whether the holder is stale (descriptor reused: the contender takes its place) or live (the contender
    /// fails with `alreadyWaiting`).
    struct Contender {
        var interest: IOInterest
        var slot: Slot
    }

    struct Entry {
        var registration: UInt64
        var kernel = Kernel.unregistered
        var reader: Slot?
        var writer: Slot?
        var contenders: [Contender] = []
        var syncing = false
        /// An event fired while a kernel call was in flight: the call's success cannot mean "armed".
        var firedWhileSyncing = false

        var hasWaiters: Bool { reader != nil || writer != nil }

        var mask: UInt32 {
            var bits: UInt32 = 0
            if reader != nil { bits |= rk_EPOLLIN | rk_EPOLLRDHUP }
            if writer != nil { bits |= rk_EPOLLOUT }
            return bits == 0 ? 0 : bits | rk_EPOLLONESHOT
        }

        var needsVerification: Bool {
            reader.map { !$0.confirmed } ?? false || writer.map { !$0.confirmed } ?? false || !contenders.isEmpty
        }

        var allWaiters: [Waiter] {
            [reader?.waiter, writer?.waiter].compactMap { $0 } + contenders.map(\.slot.waiter)
        }

        /// Whether the holder of `interest` was confirmed by the kernel; `nil` when nobody holds it. Reads the flag in
        /// place (the subscript would copy the slot and retain its waiter).
        func holderConfirmed(_ interest: IOInterest) -> Bool? {
            interest == .readable ? reader?.confirmed : writer?.confirmed
        }

        subscript(interest: IOInterest) -> Slot? {
            get { interest == .readable ? reader : writer }
            set { if interest == .readable { reader = newValue } else { writer = newValue } }
        }
    }

    private(set) var entries = EntriesByDescriptor<Entry>()
    /// The generation of the next registration: a registration is the generation in its high 32 bits and the
    /// descriptor in its low 32 bits, so that an event names its entry without a second table. Registration 0
    /// (generation 0) is reserved for the reactor's own wake-up descriptor.
    private var nextGeneration: UInt64 = 1
    /// Number of descriptors with at least one waiter.
    private(set) var count = 0

    // MARK: events

    /// Adds a waiter. Returns the kernel call to make (if none is in flight for `fd`) and waiters to fail.
    mutating func add(fd: Int32, interest: IOInterest, id: UInt64, waiter: Waiter) -> (Request?, [Failure]) {
        let slot = Slot(id: id, waiter: waiter)
        let known = update(fd) { entry -> (Request?, [Failure]) in
            if let confirmed = entry.holderConfirmed(interest) {
                // A confirmed holder may be stale (its descriptor closed and reused): ask the kernel. An
                // unconfirmed one was added since the last call, so it is live: refuse at once.
                guard confirmed else {
                    return (nil, [(waiter, Self.alreadyWaiting)])
                }
                entry.contenders.append(Contender(interest: interest, slot: slot))
            } else {
                entry[interest] = slot
            }
            return (Self.beginSync(&entry, fd: fd), [])
        }
        if let known { return known }
        var entry = Entry(registration: newRegistration(for: fd))
        entry[interest] = slot
        let request = Self.beginSync(&entry, fd: fd)
        entries[fd] = entry
        count += 1
        return (request, [])
    }

    /// Removes a cancelled waiter. Makes no kernel call (see the type's rules). Unknown ids are ignored.
    mutating func remove(fd: Int32, id: UInt64) {
        update(fd) { entry in
            if entry.reader?.id == id {
                entry.reader = nil
                Self.promoteContender(for: .readable, in: &entry)
            } else if entry.writer?.id == id {
                entry.writer = nil
                Self.promoteContender(for: .writable, in: &entry)
            } else if let index = entry.contenders.firstIndex(where: { $0.slot.id == id }) {
                entry.contenders.remove(at: index)
            }
        }
    }

    /// The kernel reported `events` for `registration` (its one-shot registration is now disarmed).
    /// Returns the waiters to resume and the re-arming call if waiters remain. Stale registrations are ignored.
    mutating func fire(registration: UInt64, events: UInt32) -> (ready: Ready, Request?) {
        let fd = Self.descriptor(of: registration)
        let fired = update(fd) { entry -> (ready: Ready, Request?) in
            guard entry.registration == registration else { return (Ready(), nil) }
            entry.kernel = .disarmed
            if entry.syncing { entry.firedWhileSyncing = true }
            let reported = IOEvents(epoll: events)
            let readable = events & (rk_EPOLLIN | rk_EPOLLRDHUP | rk_EPOLLHUP | rk_EPOLLERR) != 0
            let writable = events & (rk_EPOLLOUT | rk_EPOLLHUP | rk_EPOLLERR) != 0
            var ready = Ready()
            if readable, let reader = entry.reader.take() {
                ready.reader = (reader.waiter, reported)
            }
            if writable, let writer = entry.writer.take() {
                ready.writer = (writer.waiter, reported)
            }
            return (ready, entry.hasWaiters ? Self.beginSync(&entry, fd: fd) : nil)
        }
        return fired ?? (Ready(), nil)
    }

    /// A kernel call returned `result` (0 or an errno). Returns the next call for the same descriptor, if
    /// one is needed, and the waiters to fail.
    mutating func finish(_ request: Request, result: Int32) -> (Request?, [Failure]) {
        let fd = request.fd
        var forget = false
        // Made before the in-place access below (which holds `entries`): a generation spent on a stale answer is
        // harmless.
        let renewed = request.op == .modify && result == ENOENT ? newRegistration(for: fd) : nil
        let finished = update(fd) { entry -> (Request?, [Failure]) in
            guard entry.registration == request.registration, entry.syncing else { return (nil, []) }
            entry.syncing = false
            var failures: [Failure] = []
            switch (request.op, result) {
            case (_, 0):
                entry.kernel = entry.firedWhileSyncing ? .disarmed : .armed(request.events)
                if let reader = entry.reader?.id, request.covers.contains(reader) { entry.reader?.confirmed = true }
                if let writer = entry.writer?.id, request.covers.contains(writer) { entry.writer?.confirmed = true }
                // The holders are live: contenders covered by this call lose.
                if !entry.contenders.isEmpty {
                    entry.contenders.removeAll { contender in
                        guard request.covers.contains(contender.slot.id) else { return false }
                        failures.append((contender.slot.waiter, Self.alreadyWaiting))
                        return true
                    }
                }
            case (.modify, ENOENT):
                // The kernel forgot the registration: the descriptor was closed (and perhaps its number reused)
                // under the confirmed waiters, which can never be woken by it. Later waiters get a new
                // registration.
                for interest in [IOInterest.readable, .writable] where entry.holderConfirmed(interest) == true {
                    if let holder = entry[interest] { failures.append((holder.waiter, Self.descriptorClosed)) }
                    entry[interest] = nil
                    Self.promoteContender(for: interest, in: &entry)
                }
                for contender in entry.contenders {
                    failures.append((contender.slot.waiter, Self.alreadyWaiting))
                }
                entry.contenders = []
                entry.registration = renewed ?? entry.registration
                entry.kernel = .unregistered
            case (.add, EEXIST):
                // A registration we no longer track is still in the kernel: take it over with `MOD`.
                entry.kernel = .disarmed
            default:
                let error = Self.error(for: request.op, errno: result)
                failures += entry.allWaiters.map { ($0, error) }
                // Forgotten below, outside this in-place access; without waiters it no longer counts.
                entry.reader = nil
                entry.writer = nil
                entry.contenders = []
                forget = true
                return (nil, failures)
            }
            entry.firedWhileSyncing = false
            return (Self.beginSync(&entry, fd: fd), failures)
        }
        if forget { entries[fd] = nil }
        return finished ?? (nil, [])
    }

    /// The descriptor is about to be closed: forget it. Returns its waiters (fail them with
    /// `descriptorClosed`) and the `DEL` to make.
    mutating func descriptorWillClose(fd: Int32) -> (waiters: [Waiter], Request?) {
        guard let entry = entries.removeValue(at: fd) else { return ([], nil) }
        if entry.hasWaiters { count -= 1 }
        let registered = entry.kernel != .unregistered || entry.syncing
        return (
            entry.allWaiters,
            registered ? Request(op: .delete, fd: fd, events: 0, registration: entry.registration) : nil
        )
    }

    /// Every waiter, removing all entries (reactor shutdown); the reactor's epoll descriptor is closed next,
    /// so no kernel call is needed.
    mutating func removeAll() -> [Waiter] {
        let all = entries.values.flatMap(\.allWaiters)
        entries = EntriesByDescriptor()
        count = 0
        return all
    }

    // MARK: decisions

    /// Runs `body` on the entry of `fd` in place (no copy of the entry, its waiters or its contenders: several
    /// per wait otherwise), keeping ``count`` in step. `nil` when `fd` has no entry.
    @discardableResult
    private mutating func update<Result>(_ fd: Int32, _ body: (inout Entry) -> Result) -> Result? {
        let changed = entries.modify(fd) { entry -> (Result, Int) in
            let had = entry.hasWaiters
            let result = body(&entry)
            return (result, had == entry.hasWaiters ? 0 : entry.hasWaiters ? 1 : -1)
        }
        guard let (result, change) = changed else { return nil }
        count += change
        return result
    }

    /// Starts a kernel call for the entry of `fd` unless one is in flight (its ``finish(_:result:)`` will look
    /// again) or the kernel already holds what the waiters need.
    private static func beginSync(_ entry: inout Entry, fd: Int32) -> Request? {
        guard !entry.syncing else { return nil }
        let wanted = entry.mask
        guard wanted != 0 else { return nil }
        let op: CtlOperation
        switch entry.kernel {
        case .unregistered:
            op = .add
        case .armed(let current):
            guard entry.needsVerification || wanted & ~current != 0 else { return nil }
            op = .modify
        case .disarmed:
            op = .modify
        }
        entry.syncing = true
        let covers = Covers(
            reader: entry.reader?.id, writer: entry.writer?.id,
            contenders: entry.contenders.isEmpty ? [] : entry.contenders.map(\.slot.id))
        return Request(op: op, fd: fd, events: wanted, registration: entry.registration, covers: covers)
    }

    private static func promoteContender(for interest: IOInterest, in entry: inout Entry) {
        guard entry[interest] == nil, let index = entry.contenders.firstIndex(where: { $0.interest == interest }) else {
            return
        }
        entry[interest] = entry.contenders.remove(at: index).slot
        entry[interest]?.confirmed = false
    }

    private static func descriptor(of registration: UInt64) -> Int32 {
        Int32(bitPattern: UInt32(truncatingIfNeeded: registration))
    }

    private mutating func newRegistration(for fd: Int32) -> UInt64 {
        // Wraps after 2^32 registrations of one table; an event of a registration that old was delivered long ago.
        let generation = nextGeneration & 0xFFFF_FFFF == 0 ? 1 : nextGeneration & 0xFFFF_FFFF
        nextGeneration = generation + 1
        return generation << 32 | UInt64(UInt32(bitPattern: fd))
    }

    private static var alreadyWaiting: ResourceKitError {
        ResourceKitError(.alreadyWaiting, "another task already waits for this readiness on this descriptor")
    }

    private static var descriptorClosed: ResourceKitError {
        ResourceKitError(.descriptorClosed, "the descriptor was closed while a task waited on it")
    }

    private static func error(for op: CtlOperation, errno result: Int32) -> ResourceKitError {
        let cause = SystemError("epoll_ctl", errno: result)
        switch result {
        case EPERM:
            return ResourceKitError(
                .notPollable, "this descriptor cannot be waited on (regular file or directory); use the blocking pool")
        case EBADF, ENOENT:
            return ResourceKitError(.badDescriptor, "the descriptor is not open", underlying: cause)
        default:
            return ResourceKitError(.reactorUnavailable, "epoll_ctl failed", underlying: cause)
        }
    }
}

/// A table's entries by descriptor number. Descriptors are small, dense integers, so an array indexed by the
/// number holds them: a lookup is an index, not a hash (several per wait, on the reactor's thread and the
/// waiter's). Numbers outside `0..<limit` (a bad descriptor a caller passed, which the kernel then refuses) go
/// to a dictionary.
struct EntriesByDescriptor<Entry> {
    static var limit: Int32 { 1 << 20 }

    private var byIndex: [Entry?] = []
    private var others: [Int32: Entry] = [:]

    subscript(fd: Int32) -> Entry? {
        get {
            guard fd >= 0, fd < Self.limit else { return others[fd] }
            return Int(fd) < byIndex.count ? byIndex[Int(fd)] : nil
        }
        set {
            guard fd >= 0, fd < Self.limit else {
                others[fd] = newValue
                return
            }
            let index = Int(fd)
            if index >= byIndex.count {
                guard newValue != nil else { return }
                byIndex.append(contentsOf: repeatElement(nil, count: max(index + 1, byIndex.count * 2) - byIndex.count))
            }
            byIndex[index] = newValue
        }
    }

    /// Runs `body` on the entry of `fd` in place; `nil` (and `body` not run) when there is none.
    mutating func modify<Result>(_ fd: Int32, _ body: (inout Entry) -> Result) -> Result? {
        guard fd >= 0, fd < Self.limit else {
            guard others[fd] != nil else { return nil }
            return body(&others[fd]!)
        }
        let index = Int(fd)
        guard index < byIndex.count, byIndex[index] != nil else { return nil }
        return body(&byIndex[index]!)
    }

    /// Removes the entry of `fd` and returns it (moved out, not copied).
    mutating func removeValue(at fd: Int32) -> Entry? {
        guard fd >= 0, fd < Self.limit else { return others.removeValue(forKey: fd) }
        return Int(fd) < byIndex.count ? byIndex[Int(fd)].take() : nil
    }

    /// Every entry, in no particular order.
    var values: [Entry] { byIndex.compactMap { $0 } + Array(others.values) }
}

extension ReadinessTable: Sendable where Waiter: Sendable {}
extension EntriesByDescriptor: Sendable where Entry: Sendable {}
extension ReadinessTable.Entry: Sendable where Waiter: Sendable {}
extension ReadinessTable.Slot: Sendable where Waiter: Sendable {}
extension ReadinessTable.Contender: Sendable where Waiter: Sendable {}
