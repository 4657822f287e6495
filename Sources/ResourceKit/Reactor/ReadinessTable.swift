#if canImport(Glibc)
import Glibc
#endif
import CSystemShims

/// The reactor's bookkeeping of which waiter waits on which descriptor, as a value. Kernel calls are injected
/// (`ctl`), so the table is tested without epoll.
///
/// Every kernel registration carries a registration id, new for every `EPOLL_CTL_ADD`: an event for a
/// descriptor that was closed and whose number was reused is recognised as stale and never reaches the new
/// waiter. Registrations are one-shot: after an event the table re-arms (waiters remain) or deletes (none).
struct ReadinessTable<Waiter> {
    /// The kernel call: (operation, fd, events, registration) -> 0 or errno.
    typealias Ctl = (CtlOperation, Int32, UInt32, UInt64) -> Int32

    enum CtlOperation: Int32 { case add = 1, delete = 2, modify = 3 }

    struct Entry {
        var registration: UInt64
        var reader: (id: UInt64, waiter: Waiter)?
        var writer: (id: UInt64, waiter: Waiter)?

        var isEmpty: Bool { reader == nil && writer == nil }

        var mask: UInt32 {
            var bits = rk_EPOLLONESHOT
            if reader != nil { bits |= rk_EPOLLIN | rk_EPOLLRDHUP }
            if writer != nil { bits |= rk_EPOLLOUT }
            return bits
        }

        var waiters: [Waiter] { [reader?.waiter, writer?.waiter].compactMap { $0 } }
    }

    private(set) var entries: [Int32: Entry] = [:]
    private var fdByRegistration: [UInt64: Int32] = [:]
    /// Registration 0 is reserved for the reactor's own wake-up descriptor.
    private var nextRegistration: UInt64 = 1

    /// Number of descriptors with at least one waiter.
    var count: Int { entries.count }

    /// Adds a waiter.
    /// - Returns: an error for the new waiter (it must be failed with it) and older waiters that turned out to
    ///   be waiting on a descriptor that was closed under them (fail them with `descriptorClosed`).
    mutating func add(
        fd: Int32, interest: IOInterest, id: UInt64, waiter: Waiter, ctl: Ctl
    ) -> (error: ResourceKitError?, evicted: [Waiter]) {
        var evicted: [Waiter] = []
        if var entry = entries[fd] {
            let conflict: Bool
            switch interest {
            case .readable:
                conflict = entry.reader != nil
                if !conflict { entry.reader = (id, waiter) }
            case .writable:
                conflict = entry.writer != nil
                if !conflict { entry.writer = (id, waiter) }
            }
            // Ask the kernel first: the descriptor may have been closed (and its number reused) under the
            // waiters we hold, in which case they are stale and the new waiter is not a conflict.
            let result = ctl(.modify, fd, entry.mask, entry.registration)
            if result == 0 {
                if conflict {
                    return (ResourceKitError(.alreadyWaiting, "another task already waits for this readiness on this descriptor"), [])
                }
                entries[fd] = entry
                return (nil, [])
            }
            // The kernel forgot the registration: the descriptor was closed (and perhaps reused) under the
            // waiters we still have. They can never be woken by it again.
            let stale = entries.removeValue(forKey: fd)!
            fdByRegistration.removeValue(forKey: stale.registration)
            evicted = stale.waiters
            if result == EBADF {
                return (ResourceKitError(.badDescriptor, "the descriptor is not open", underlying: SystemError("epoll_ctl", errno: result)), evicted)
            }
            if result != ENOENT {
                return (ResourceKitError(.reactorUnavailable, "epoll_ctl failed", underlying: SystemError("epoll_ctl", errno: result)), evicted)
            }
        }
        var entry = Entry(registration: nextRegistration)
        nextRegistration += 1
        switch interest {
        case .readable: entry.reader = (id, waiter)
        case .writable: entry.writer = (id, waiter)
        }
        var result = ctl(.add, fd, entry.mask, entry.registration)
        if result == EEXIST {
            result = ctl(.modify, fd, entry.mask, entry.registration)
        }
        switch result {
        case 0:
            entries[fd] = entry
            fdByRegistration[entry.registration] = fd
            return (nil, evicted)
        case EPERM:
            return (ResourceKitError(.notPollable, "this descriptor cannot be waited on (regular file or directory); use the blocking pool"), evicted)
        case EBADF:
            return (ResourceKitError(.badDescriptor, "the descriptor is not open", underlying: SystemError("epoll_ctl", errno: result)), evicted)
        default:
            return (ResourceKitError(.reactorUnavailable, "epoll_ctl failed", underlying: SystemError("epoll_ctl", errno: result)), evicted)
        }
    }

    /// Removes a waiter (cancelled). Unknown ids are ignored (it already fired or was evicted).
    mutating func remove(fd: Int32, id: UInt64, ctl: Ctl) {
        guard var entry = entries[fd] else { return }
        if entry.reader?.id == id {
            entry.reader = nil
        } else if entry.writer?.id == id {
            entry.writer = nil
        } else {
            return
        }
        settle(fd: fd, entry: entry, ctl: ctl)
    }

    /// The kernel reported `events` for `registration`.
    /// - Returns: the waiters to resume with those events. Stale registrations return nothing.
    mutating func fire(registration: UInt64, events: UInt32, ctl: Ctl) -> [(Waiter, IOEvents)] {
        guard let fd = fdByRegistration[registration], var entry = entries[fd], entry.registration == registration else {
            return []
        }
        let reported = IOEvents(epoll: events)
        let readable = events & (rk_EPOLLIN | rk_EPOLLRDHUP | rk_EPOLLHUP | rk_EPOLLERR) != 0
        let writable = events & (rk_EPOLLOUT | rk_EPOLLHUP | rk_EPOLLERR) != 0
        var ready: [(Waiter, IOEvents)] = []
        if readable, let reader = entry.reader {
            ready.append((reader.waiter, reported))
            entry.reader = nil
        }
        if writable, let writer = entry.writer {
            ready.append((writer.waiter, reported))
            entry.writer = nil
        }
        settle(fd: fd, entry: entry, ctl: ctl)
        return ready
    }

    /// The descriptor is about to be closed: forget it and return its waiters (fail them with
    /// `descriptorClosed`).
    mutating func descriptorWillClose(fd: Int32, ctl: Ctl) -> [Waiter] {
        guard let entry = entries.removeValue(forKey: fd) else { return [] }
        fdByRegistration.removeValue(forKey: entry.registration)
        _ = ctl(.delete, fd, 0, entry.registration)
        return entry.waiters
    }

    /// Every waiter, removing all entries (reactor shutdown).
    mutating func removeAll(ctl: Ctl) -> [Waiter] {
        let all = entries.values.flatMap(\.waiters)
        for (fd, entry) in entries { _ = ctl(.delete, fd, 0, entry.registration) }
        entries = [:]
        fdByRegistration = [:]
        return all
    }

    /// Re-arms an entry that still has waiters, or deletes it.
    private mutating func settle(fd: Int32, entry: Entry, ctl: Ctl) {
        if entry.isEmpty {
            entries.removeValue(forKey: fd)
            fdByRegistration.removeValue(forKey: entry.registration)
            _ = ctl(.delete, fd, 0, entry.registration)
        } else {
            entries[fd] = entry
            _ = ctl(.modify, fd, entry.mask, entry.registration)
        }
    }
}

extension ReadinessTable: Sendable where Waiter: Sendable {}
extension ReadinessTable.Entry: Sendable where Waiter: Sendable {}
