import CSystemShims
import Glibc
import Testing

@testable import ResourceKit
import ResourceKitObservation
@testable import ResourceKitIO

/// The reactor's descriptor table as a value, with a fake kernel that performs the calls the table returns.
@Suite struct ReadinessTableTests {
    typealias Table = ReadinessTable<Int>

    /// A fake epoll: remembers registrations, can be told a descriptor was closed.
    final class FakeKernel {
        var registered: [Int32: (events: UInt32, data: UInt64)] = [:]
        var closed: Set<Int32> = []
        var notPollable: Set<Int32> = []
        var calls: [(Table.CtlOperation, Int32)] = []

        func ctl(_ request: Table.Request) -> Int32 {
            let fd = request.fd
            calls.append((request.op, fd))
            if notPollable.contains(fd) { return EPERM }
            switch request.op {
            case .add:
                if registered[fd] != nil { return EEXIST }
                registered[fd] = (request.events, request.registration)
            case .modify:
                guard registered[fd] != nil else { return closed.contains(fd) ? EBADF : ENOENT }
                registered[fd] = (request.events, request.registration)
            case .delete:
                guard registered.removeValue(forKey: fd) != nil else { return ENOENT }
            }
            return 0
        }

        /// close(fd) then the number is reused by a new file: the kernel forgets the registration.
        func closeAndReuse(_ fd: Int32) { registered.removeValue(forKey: fd) }

        /// The reactor's driver: performs `request` and every follow-up; returns the waiters failed.
        func perform(_ request: Table.Request?, on table: inout Table) -> [(Int, ResourceKitError.Code)] {
            var failed: [(Int, ResourceKitError.Code)] = []
            var next = request
            while let current = next {
                let (follow, failures) = table.finish(current, result: ctl(current))
                failed += failures.map { ($0.waiter, $0.error.code) }
                next = follow
            }
            return failed
        }

        /// `add` plus the calls it asks for.
        func add(_ table: inout Table, fd: Int32, _ interest: IOInterest, id: UInt64, waiter: Int) -> [(
            Int, ResourceKitError.Code
        )] {
            let (request, failures) = table.add(fd: fd, interest: interest, id: id, waiter: waiter)
            return failures.map { ($0.waiter, $0.error.code) } + perform(request, on: &table)
        }

        /// The one-shot event fired (the kernel disarms it), plus the re-arming call.
        func fire(_ table: inout Table, fd: Int32, events: UInt32) -> [Int] {
            let registration = registered[fd]!.data
            let (ready, request) = table.fire(registration: registration, events: events)
            _ = perform(request, on: &table)
            return ready.map(\.0)
        }
    }

    @Test func readerFiresAndStaysRegisteredDisarmed() {
        let kernel = FakeKernel()
        var table = Table()
        #expect(kernel.add(&table, fd: 5, .readable, id: 1, waiter: 100).isEmpty)
        #expect(kernel.registered[5]!.events & rk_EPOLLIN != 0)
        #expect(kernel.fire(&table, fd: 5, events: rk_EPOLLIN) == [100])
        #expect(table.count == 0)
        // Nothing to re-arm: no call after the event; the next waiter re-arms with one MOD.
        #expect(kernel.calls.map(\.0) == [.add])
        #expect(kernel.add(&table, fd: 5, .readable, id: 2, waiter: 200).isEmpty)
        #expect(kernel.calls.map(\.0) == [.add, .modify])
    }

    @Test func readerAndWriterShareARegistration() {
        let kernel = FakeKernel()
        var table = Table()
        _ = kernel.add(&table, fd: 5, .readable, id: 1, waiter: 100)
        _ = kernel.add(&table, fd: 5, .writable, id: 2, waiter: 200)
        let reg = kernel.registered[5]!
        #expect(reg.events & rk_EPOLLIN != 0 && reg.events & rk_EPOLLOUT != 0)
        #expect(kernel.fire(&table, fd: 5, events: rk_EPOLLOUT) == [200])
        // Re-armed for the reader only.
        #expect(kernel.registered[5]!.events & rk_EPOLLOUT == 0)
        #expect(kernel.registered[5]!.events & rk_EPOLLIN != 0)
        #expect(table.count == 1)
    }

    @Test func secondReaderOnSameDescriptorIsRefused() {
        let kernel = FakeKernel()
        var table = Table()
        _ = kernel.add(&table, fd: 5, .readable, id: 1, waiter: 100)
        let failed = kernel.add(&table, fd: 5, .readable, id: 2, waiter: 200)
        #expect(failed.map(\.0) == [200])
        #expect(failed.first?.1 == .alreadyWaiting)
        #expect(table.entries[5]?.reader?.waiter == 100)
    }

    @Test func cancellingAWaiterMakesNoKernelCall() {
        let kernel = FakeKernel()
        var table = Table()
        _ = kernel.add(&table, fd: 5, .readable, id: 1, waiter: 100)
        let calls = kernel.calls.count
        table.remove(fd: 5, id: 1)
        #expect(kernel.calls.count == calls)
        #expect(table.count == 0)
        // The armed registration's event finds nobody, and the next waiter gets the next event.
        #expect(kernel.fire(&table, fd: 5, events: rk_EPOLLIN).isEmpty)
        _ = kernel.add(&table, fd: 5, .readable, id: 2, waiter: 200)
        #expect(kernel.fire(&table, fd: 5, events: rk_EPOLLIN) == [200])
    }

    @Test func staleEventForReusedDescriptorIsNotDelivered() {
        let kernel = FakeKernel()
        var table = Table()
        _ = kernel.add(&table, fd: 5, .readable, id: 1, waiter: 100)
        let oldRegistration = kernel.registered[5]!.data
        // Cancelled, then the fd is closed and its number reused by a new waiter.
        table.remove(fd: 5, id: 1)
        kernel.closeAndReuse(5)
        #expect(kernel.add(&table, fd: 5, .readable, id: 2, waiter: 200).isEmpty)
        let newRegistration = kernel.registered[5]!.data
        #expect(newRegistration != oldRegistration)
        let stale = table.fire(registration: oldRegistration, events: rk_EPOLLIN)
        #expect(stale.ready.isEmpty && stale.1 == nil)
        #expect(kernel.fire(&table, fd: 5, events: rk_EPOLLIN) == [200])
    }

    @Test func descriptorClosedUnderWaiterIsEvictedWhenNumberIsReused() {
        let kernel = FakeKernel()
        var table = Table()
        _ = kernel.add(&table, fd: 5, .readable, id: 1, waiter: 100)
        kernel.closeAndReuse(5)
        let failed = kernel.add(&table, fd: 5, .writable, id: 2, waiter: 200)
        #expect(failed.map(\.0) == [100])
        #expect(failed.first?.1 == .descriptorClosed)
        #expect(table.entries[5]?.writer?.waiter == 200)
        #expect(table.entries[5]?.reader == nil)
        #expect(kernel.registered[5] != nil)
    }

    @Test func sameDirectionWaiterAfterReuseEvictsTheStaleOne() {
        let kernel = FakeKernel()
        var table = Table()
        _ = kernel.add(&table, fd: 5, .readable, id: 1, waiter: 100)
        kernel.closeAndReuse(5)
        let failed = kernel.add(&table, fd: 5, .readable, id: 2, waiter: 200)
        #expect(failed.map(\.0) == [100])
        #expect(failed.first?.1 == .descriptorClosed)
        #expect(table.entries[5]?.reader?.waiter == 200)
        #expect(kernel.fire(&table, fd: 5, events: rk_EPOLLIN) == [200])
    }

    @Test func descriptorWillCloseReturnsWaitersAndTheDelete() {
        let kernel = FakeKernel()
        var table = Table()
        _ = kernel.add(&table, fd: 9, .readable, id: 1, waiter: 1)
        _ = kernel.add(&table, fd: 9, .writable, id: 2, waiter: 2)
        let (waiters, delete) = table.descriptorWillClose(fd: 9)
        #expect(Set(waiters) == [1, 2])
        #expect(table.count == 0)
        #expect(delete?.op == .delete)
        _ = delete.map(kernel.ctl)
        #expect(kernel.registered[9] == nil)
    }

    @Test func regularFileIsNotPollable() {
        let kernel = FakeKernel()
        kernel.notPollable = [3]
        var table = Table()
        let failed = kernel.add(&table, fd: 3, .readable, id: 1, waiter: 1)
        #expect(failed.map(\.0) == [1])
        #expect(failed.first?.1 == .notPollable)
        #expect(table.count == 0)
        #expect(table.entries[3] == nil)
    }

    @Test func removeUnknownWaiterIsIgnored() {
        let kernel = FakeKernel()
        var table = Table()
        table.remove(fd: 1, id: 99)
        _ = kernel.add(&table, fd: 1, .readable, id: 1, waiter: 1)
        table.remove(fd: 1, id: 99)
        #expect(table.count == 1)
    }

    /// Two threads' calls for one descriptor never overlap: a waiter added while a call is in flight is
    /// folded into the follow-up the in-flight call's finish returns.
    @Test func oneCallInFlightPerDescriptor() {
        let kernel = FakeKernel()
        var table = Table()
        let (first, _) = table.add(fd: 7, interest: .readable, id: 1, waiter: 1)
        let (second, _) = table.add(fd: 7, interest: .writable, id: 2, waiter: 2)
        #expect(first?.op == .add)
        #expect(second == nil)
        let (follow, failures) = table.finish(first!, result: kernel.ctl(first!))
        #expect(failures.isEmpty)
        #expect(follow?.op == .modify)
        #expect(follow.map { $0.events & rk_EPOLLOUT != 0 } == true)
        _ = kernel.perform(follow, on: &table)
        #expect(kernel.registered[7]!.events & (rk_EPOLLIN | rk_EPOLLOUT) == rk_EPOLLIN | rk_EPOLLOUT)
    }

    /// An event that fires while a call is in flight: the call's success must not count as "armed", or the
    /// remaining waiter would never be re-armed.
    @Test func eventDuringAnInFlightCallStillRearms() {
        let kernel = FakeKernel()
        var table = Table()
        _ = kernel.add(&table, fd: 7, .readable, id: 1, waiter: 1)
        let (modify, _) = table.add(fd: 7, interest: .writable, id: 2, waiter: 2)
        let result = kernel.ctl(modify!)
        // The MOD reached the kernel; its one-shot event fires before the caller reports back.
        let (ready, rearm) = table.fire(registration: kernel.registered[7]!.data, events: rk_EPOLLOUT)
        #expect(ready.map(\.0) == [2])
        #expect(rearm == nil)
        let (follow, _) = table.finish(modify!, result: result)
        #expect(follow?.op == .modify)
        #expect(follow.map { $0.events & rk_EPOLLIN != 0 } == true)
    }

    /// A registration names its descriptor (an event finds its entry without a second table), and every new
    /// registration of one descriptor number is a new one: an event of the old one reaches nobody.
    @Test func registrationsNameTheirDescriptorAndDifferPerRegistration() {
        let kernel = FakeKernel()
        var table = Table()
        _ = kernel.add(&table, fd: 9, .readable, id: 1, waiter: 1)
        let first = kernel.registered[9]!.data
        #expect(first != 0)
        #expect(first & 0xFFFF_FFFF == 9)
        let (waiters, delete) = table.descriptorWillClose(fd: 9)
        #expect(waiters == [1])
        _ = kernel.perform(delete, on: &table)
        _ = kernel.add(&table, fd: 9, .readable, id: 2, waiter: 2)
        let second = kernel.registered[9]!.data
        #expect(second != first)
        #expect(second & 0xFFFF_FFFF == 9)
        #expect(table.fire(registration: first, events: rk_EPOLLIN).ready.isEmpty)
        #expect(table.fire(registration: second, events: rk_EPOLLIN).ready.map(\.0) == [2])
    }

    /// Descriptor numbers outside the indexed range (a bad one a caller passed) are kept apart and fail like any
    /// other the kernel refuses.
    @Test func descriptorNumbersOutsideTheIndexedRangeAreKeptApart() {
        var entries = EntriesByDescriptor<Int>()
        let far = EntriesByDescriptor<Int>.limit + 3
        entries[0] = 10
        entries[5] = 15
        entries[-1] = -1
        entries[far] = 3
        #expect(entries[0] == 10)
        #expect(entries[5] == 15)
        #expect(entries[-1] == -1)
        #expect(entries[far] == 3)
        #expect(entries[4] == nil)
        #expect(entries.values.sorted() == [-1, 3, 10, 15])
        entries[5] = nil
        entries[-1] = nil
        #expect(entries[5] == nil)
        #expect(entries.values.sorted() == [3, 10])

        let kernel = FakeKernel()
        kernel.notPollable = [-1]
        var table = Table()
        let failed = kernel.add(&table, fd: -1, .readable, id: 1, waiter: 1)
        #expect(failed.map(\.0) == [1])
        #expect(table.count == 0)
        #expect(table.entries[-1] == nil)
    }
}
