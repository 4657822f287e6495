import CSystemShims
import Glibc
import Testing
@testable import ResourceKit

/// The reactor's descriptor table as a value, with a fake kernel.
@Suite struct ReadinessTableTests {
    /// A fake epoll: remembers registrations, can be told a descriptor was closed.
    final class FakeKernel {
        var registered: [Int32: (events: UInt32, data: UInt64)] = [:]
        var closed: Set<Int32> = []
        var notPollable: Set<Int32> = []
        var calls: [(ReadinessTable<Int>.CtlOperation, Int32)] = []

        func ctl(_ op: ReadinessTable<Int>.CtlOperation, _ fd: Int32, _ events: UInt32, _ data: UInt64) -> Int32 {
            calls.append((op, fd))
            if notPollable.contains(fd) { return EPERM }
            switch op {
            case .add:
                if registered[fd] != nil { return EEXIST }
                registered[fd] = (events, data)
            case .modify:
                guard registered[fd] != nil else { return closed.contains(fd) ? EBADF : ENOENT }
                registered[fd] = (events, data)
            case .delete:
                guard registered.removeValue(forKey: fd) != nil else { return ENOENT }
            }
            return 0
        }

        /// close(fd) then the number is reused by a new file: the kernel forgets the registration.
        func closeAndReuse(_ fd: Int32) { registered.removeValue(forKey: fd) }
    }

    @Test func readerFiresAndEntryIsRemoved() {
        let kernel = FakeKernel()
        var table = ReadinessTable<Int>()
        let r = table.add(fd: 5, interest: .readable, id: 1, waiter: 100, ctl: kernel.ctl)
        #expect(r.error == nil && r.evicted.isEmpty)
        let data = kernel.registered[5]!.data
        #expect(kernel.registered[5]!.events & rk_EPOLLIN != 0)
        let fired = table.fire(registration: data, events: rk_EPOLLIN, ctl: kernel.ctl)
        #expect(fired.map(\.0) == [100])
        #expect(fired.first?.1.contains(.readable) == true)
        #expect(table.count == 0)
        #expect(kernel.registered[5] == nil)
    }

    @Test func readerAndWriterShareARegistration() {
        let kernel = FakeKernel()
        var table = ReadinessTable<Int>()
        _ = table.add(fd: 5, interest: .readable, id: 1, waiter: 100, ctl: kernel.ctl)
        _ = table.add(fd: 5, interest: .writable, id: 2, waiter: 200, ctl: kernel.ctl)
        let reg = kernel.registered[5]!
        #expect(reg.events & rk_EPOLLIN != 0 && reg.events & rk_EPOLLOUT != 0)
        let fired = table.fire(registration: reg.data, events: rk_EPOLLOUT, ctl: kernel.ctl)
        #expect(fired.map(\.0) == [200])
        // Re-armed for the reader only.
        #expect(kernel.registered[5]!.events & rk_EPOLLOUT == 0)
        #expect(kernel.registered[5]!.events & rk_EPOLLIN != 0)
        #expect(table.count == 1)
    }

    @Test func secondReaderOnSameDescriptorIsRefused() {
        let kernel = FakeKernel()
        var table = ReadinessTable<Int>()
        _ = table.add(fd: 5, interest: .readable, id: 1, waiter: 100, ctl: kernel.ctl)
        let r = table.add(fd: 5, interest: .readable, id: 2, waiter: 200, ctl: kernel.ctl)
        #expect(r.error?.code == .alreadyWaiting)
    }

    @Test func staleEventForReusedDescriptorIsNotDelivered() {
        let kernel = FakeKernel()
        var table = ReadinessTable<Int>()
        _ = table.add(fd: 5, interest: .readable, id: 1, waiter: 100, ctl: kernel.ctl)
        let oldRegistration = kernel.registered[5]!.data
        // Cancelled, then the fd is closed and its number reused by a new waiter.
        table.remove(fd: 5, id: 1, ctl: kernel.ctl)
        _ = table.add(fd: 5, interest: .readable, id: 2, waiter: 200, ctl: kernel.ctl)
        let newRegistration = kernel.registered[5]!.data
        #expect(newRegistration != oldRegistration)
        let stale = table.fire(registration: oldRegistration, events: rk_EPOLLIN, ctl: kernel.ctl)
        #expect(stale.isEmpty)
        let fresh = table.fire(registration: newRegistration, events: rk_EPOLLIN, ctl: kernel.ctl)
        #expect(fresh.map(\.0) == [200])
    }

    @Test func descriptorClosedUnderWaiterIsEvictedWhenNumberIsReused() {
        let kernel = FakeKernel()
        var table = ReadinessTable<Int>()
        _ = table.add(fd: 5, interest: .readable, id: 1, waiter: 100, ctl: kernel.ctl)
        kernel.closeAndReuse(5)
        let r = table.add(fd: 5, interest: .writable, id: 2, waiter: 200, ctl: kernel.ctl)
        #expect(r.error == nil)
        #expect(r.evicted == [100])
        #expect(table.entries[5]?.writer?.waiter == 200)
        #expect(table.entries[5]?.reader == nil)
    }

    @Test func sameDirectionWaiterAfterReuseEvictsTheStaleOne() {
        let kernel = FakeKernel()
        var table = ReadinessTable<Int>()
        _ = table.add(fd: 5, interest: .readable, id: 1, waiter: 100, ctl: kernel.ctl)
        kernel.closeAndReuse(5)
        let r = table.add(fd: 5, interest: .readable, id: 2, waiter: 200, ctl: kernel.ctl)
        #expect(r.error == nil)
        #expect(r.evicted == [100])
        #expect(table.entries[5]?.reader?.waiter == 200)
    }

    @Test func descriptorWillCloseReturnsWaiters() {
        let kernel = FakeKernel()
        var table = ReadinessTable<Int>()
        _ = table.add(fd: 9, interest: .readable, id: 1, waiter: 1, ctl: kernel.ctl)
        _ = table.add(fd: 9, interest: .writable, id: 2, waiter: 2, ctl: kernel.ctl)
        let waiters = table.descriptorWillClose(fd: 9, ctl: kernel.ctl)
        #expect(Set(waiters) == [1, 2])
        #expect(table.count == 0)
        #expect(kernel.registered[9] == nil)
    }

    @Test func regularFileIsNotPollable() {
        let kernel = FakeKernel()
        kernel.notPollable = [3]
        var table = ReadinessTable<Int>()
        let r = table.add(fd: 3, interest: .readable, id: 1, waiter: 1, ctl: kernel.ctl)
        #expect(r.error?.code == .notPollable)
        #expect(table.count == 0)
    }

    @Test func removeUnknownWaiterIsIgnored() {
        let kernel = FakeKernel()
        var table = ReadinessTable<Int>()
        table.remove(fd: 1, id: 99, ctl: kernel.ctl)
        _ = table.add(fd: 1, interest: .readable, id: 1, waiter: 1, ctl: kernel.ctl)
        table.remove(fd: 1, id: 99, ctl: kernel.ctl)
        #expect(table.count == 1)
    }
}

@Suite struct TimerHeapTests {
    @Test func popsInDeadlineOrderAndSkipsCancelled() {
        var heap = TimerHeap<Int>()
        let base = ContinuousClock.now
        _ = heap.schedule(at: base + .milliseconds(30), 3)
        let cancelled = heap.schedule(at: base + .milliseconds(10), 1)
        _ = heap.schedule(at: base + .milliseconds(20), 2)
        let firstCancel = heap.cancel(cancelled)
        let secondCancel = heap.cancel(cancelled)
        #expect(firstCancel)
        #expect(!secondCancel)
        let next = heap.nextDeadline()
        #expect(next == base + .milliseconds(20))
        let first = heap.popExpired(now: base + .milliseconds(25))
        #expect(first == [2])
        let second = heap.popExpired(now: base + .milliseconds(100))
        #expect(second == [3])
        #expect(heap.count == 0)
        let none = heap.nextDeadline()
        #expect(none == nil)
    }

    @Test func manyCancelledTimersAreCompacted() {
        var heap = TimerHeap<Int>()
        let base = ContinuousClock.now
        for i in 0..<10_000 {
            let id = heap.schedule(at: base + .seconds(Double(i % 97)), i)
            heap.cancel(id)
        }
        #expect(heap.count == 0)
        // Compaction keeps the stored entries within twice the live ones (plus its floor of 64): without it,
        // all 10,000 cancelled entries would still be stored.
        #expect(heap.storedCount <= 65, "\(heap.storedCount) entries stored for 0 live timers")
        let none = heap.nextDeadline()
        #expect(none == nil)
    }
}

@Suite struct LatencyHistogramTests {
    @Test func quantilesAreWithinBucketWidth() {
        var h = LatencyHistogram()
        for us in 1...1000 {
            h.record(.microseconds(us))
        }
        let p50 = h.p50!
        let p99 = h.p99!
        #expect(p50 >= .microseconds(500) && p50 <= .microseconds(500) * 1.15)
        #expect(p99 >= .microseconds(990) && p99 <= .microseconds(1000))
        #expect(h.count == 1000)
        #expect(h.min == .microseconds(1))
        #expect(h.max == .microseconds(1000))
        #expect(LatencyHistogram().p50 == nil)
    }
}
