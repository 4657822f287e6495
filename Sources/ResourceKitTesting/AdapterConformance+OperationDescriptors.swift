import Glibc
import ResourceKit

extension AdapterConformance {
    /// Descriptors the operation opens while it runs (a socket per request, a library's connection) must be
    /// closed or shut down at once when the operation is cancelled: a socket left open keeps the peer working for
    /// nobody. The kit sees them through `ownedDescriptors`, asked again while the operation blocks (report the
    /// descriptors a library holds: `LibraryDescriptors.descriptors`). An open socket counts as stopped when its
    /// sending side is shut down (a zero-byte send fails with `EPIPE`): its peer has seen the end.
    ///
    /// "Blocked" is confirmed on the wire before the kit cancels: each new TCP socket is connected and has sent
    /// data (the request is out), or ``Bounds/settle`` four times over passed. After the cancel the kit watches
    /// those descriptors: they must stop within ``Bounds/externalStop`` of the cancel (a loop that looks at a flag
    /// at its next turn stops late), be stopped when the operation returned, and be closed by the scope's end.
    func operationDescriptorsReleased() async -> ConformanceReport.Check {
        let name = "the operation's own descriptors are released"
        guard let ownedDescriptors else {
            return Self.skipped(name, "needs ownedDescriptors, asked while the operation runs")
        }
        let operations = Locked<[Int32: String]>([:])
        return await withFreshResource(name, alsoClosedByTheEnd: operations) {
            scope, resource, _, problems, measurements in
            let atMake = Set(ownedDescriptors(resource))
            let (task, returned) = Self.start(operation, on: resource)
            await Self.parked(scope, within: bounds.settle)
            let opened = await confirmedOnTheWire(resource, besides: atMake, measurements: &measurements)
            // Shut down is enough at the return; by the scope's end each must be closed (a shut-down socket never
            // closed is a descriptor leaked).
            operations.withLock { seen in
                for fd in opened.keys { seen[fd] = DescriptorLedger.target(of: fd) }
            }
            let cancelled = ContinuousClock.now
            task.cancel()
            // The wire, watched while the operation returns: when did its descriptors stop?
            var stopped: Duration?
            while !opened.isEmpty, ContinuousClock.now - cancelled < bounds.hang {
                if opened.allSatisfy({ fd, identity in identity.isStopped(fd) }) {
                    // Seen now, or at the return if that came first: a look delayed by a loaded machine must not
                    // make a stop that came with the return look late.
                    let seen = ContinuousClock.now
                    stopped = min(seen, returned.withLock { $0 } ?? seen) - cancelled
                    break
                }
                if returned.withLock({ $0 }) != nil { break }
                try? await Task.sleep(for: .microseconds(500))
            }
            let (ended, _) = await Self.wait(for: task, upTo: bounds.hang)
            guard ended != nil else {
                problems.append(
                    """
                    the operation was still blocked \(bounds.hang) after its task was cancelled (see the check \
                    "cancel while blocked, through the task").
                    """)
                scope.cancel()
                return
            }
            guard !opened.isEmpty else {
                measurements.append("the operation opened no descriptor of its own")
                return
            }
            let leftOpen = opened.filter { fd, identity in !identity.isStopped(fd) }
            measurements.append("\(opened.count) descriptor(s) of the operation, \(leftOpen.count) left open")
            if !leftOpen.isEmpty {
                let kinds = Set(leftOpen.values.map(\.kind)).sorted().joined(separator: ", ")
                problems.append(
                    """
                    \(leftOpen.count) descriptor(s) the operation opened (\(kinds)) were still open, and not shut \
                    down, after the cancelled operation returned: the peer goes on serving a request nobody waits \
                    for. Shut them down in the operation's onCancel or the resource's cancel() (for a library's \
                    sockets, LibraryDescriptors.shutdownAll()), or close them before the operation returns.
                    """)
                return
            }
            let stop = stopped ?? (returned.withLock { $0 } ?? .now) - cancelled
            measurements.append("stopped on the wire \(Self.text(stop)) after the cancel")
            if stop > bounds.externalStop {
                problems.append(
                    """
                    the operation's descriptors stopped \(Self.text(stop)) after the cancel, more than \
                    \(Self.text(bounds.externalStop)): the transfer went on after the cancel (a loop that looks \
                    at a cancelled flag at its next turn, a cleanup that comes later). Shut them down in the \
                    operation's onCancel (for a library's sockets, LibraryDescriptors.shutdownAll()), which runs \
                    at the cancel.
                    """)
            }
        }
    }

    /// The descriptors the operation opened (what `ownedDescriptors` reports now and did not after `make`), once
    /// each TCP socket among them is connected and has sent data, or after ``Bounds/settle`` four times over.
    private func confirmedOnTheWire(
        _ resource: Resource, besides atMake: Set<Int32>, measurements: inout [String]
    ) async -> [Int32: OperationDescriptor] {
        guard let ownedDescriptors else { return [:] }
        let start = ContinuousClock.now
        var opened: [Int32: OperationDescriptor] = [:]
        while true {
            // With their identities: a number closed and reused by another test is not the same descriptor.
            opened = [:]
            for fd in Set(ownedDescriptors(resource)).subtracting(atMake) {
                if let identity = OperationDescriptor(fd) { opened[fd] = identity }
            }
            if !opened.isEmpty, opened.allSatisfy({ fd, identity in identity.carriesData(fd) }) {
                if opened.values.contains(where: \.isSocket) {
                    measurements.append("blocked: data on the operation's socket(s) \(Self.text(.now - start)) in")
                }
                return opened
            }
            if ContinuousClock.now - start >= bounds.settle * 4 { return opened }
            try? await Task.sleep(for: .milliseconds(1))
        }
    }
}

/// One descriptor as the kit saw it: its device and inode (a reused number is another descriptor) and its kind.
struct OperationDescriptor: Equatable {
    let device: UInt64
    let inode: UInt64
    let isSocket: Bool

    init?(_ fd: Int32) {
        var info = stat()
        guard fstat(fd, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        isSocket = (info.st_mode & S_IFMT) == S_IFSOCK
    }

    var kind: String { isSocket ? "socket" : "not a socket" }

    /// Closed (the number is gone or another descriptor's now) or, for a socket, shut down.
    func isStopped(_ fd: Int32) -> Bool {
        OperationDescriptor(fd) != self || sendingSideIsShutDown(fd)
    }

    /// A TCP socket that is connected and has sent or received data (the kernel's `tcp_info`); `true` for
    /// anything else, which has no wire to confirm.
    func carriesData(_ fd: Int32) -> Bool {
        guard isSocket else { return true }
        // The kernel's `struct tcp_info` is longer than glibc's: its data segment counters sit at fixed offsets
        // (`tcpi_data_segs_in` at 152, `tcpi_data_segs_out` at 156; Linux 4.6 and later).
        var info = [UInt8](repeating: 0, count: 232)
        var length = socklen_t(info.count)
        guard getsockopt(fd, Int32(IPPROTO_TCP), TCP_INFO, &info, &length) == 0 else { return true }
        guard length >= 160 else { return true }
        let established: UInt8 = 1
        let carried = info.withUnsafeBytes { bytes in
            bytes.loadUnaligned(fromByteOffset: 152, as: UInt32.self) > 0
                || bytes.loadUnaligned(fromByteOffset: 156, as: UInt32.self) > 0
        }
        return info[0] == established && carried
    }

    /// A socket whose sending side is shut down (by this process, or because the connection ended): a zero-byte
    /// send fails with `EPIPE` (`ENOTCONN`: never connected). Anything else is still a live connection.
    func sendingSideIsShutDown(_ fd: Int32) -> Bool {
        guard isSocket else { return false }
        if send(fd, nil, 0, Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) == 0 { return false }
        return errno == EPIPE || errno == ENOTCONN
    }
}
