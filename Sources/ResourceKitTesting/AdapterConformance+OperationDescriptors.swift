import Glibc
import ResourceKit

extension AdapterConformance {
    /// Descriptors the operation opens while it runs (a socket per request, a library's connection) must be
    /// closed or shut down once the cancelled operation returned: a socket left open keeps the peer working for
    /// nobody. The kit sees them through `ownedDescriptors`, asked again while the operation blocks (report the
    /// descriptors a library holds: `LibraryDescriptors.descriptors`). An open socket counts as released when its
    /// sending side is shut down (a zero-byte send fails with `EPIPE`): its peer has seen the end.
    func operationDescriptorsReleased() async -> ConformanceReport.Check {
        let name = "the operation's own descriptors are released"
        guard let ownedDescriptors else {
            return Self.skipped(name, "needs ownedDescriptors, asked while the operation runs")
        }
        return await withFreshResource(name) { scope, resource, _, problems, measurements in
            let atMake = Set(ownedDescriptors(resource))
            let (task, _) = Self.start(operation, on: resource)
            await Self.parked(scope, within: bounds.settle)
            // The operation's own: what the resource reports now and did not after `make`, with their identities
            // (a number closed and reused by another test is not the same descriptor).
            var opened: [Int32: OperationDescriptor] = [:]
            for fd in Set(ownedDescriptors(resource)).subtracting(atMake) {
                if let identity = OperationDescriptor(fd) { opened[fd] = identity }
            }
            task.cancel()
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
            let leftOpen = opened.filter { fd, identity in
                OperationDescriptor(fd) == identity && !identity.sendingSideIsShutDown(fd)
            }
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
            }
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

    /// A socket whose sending side is shut down (by this process, or because the connection ended): a zero-byte
    /// send fails with `EPIPE` (`ENOTCONN`: never connected). Anything else is still a live connection.
    func sendingSideIsShutDown(_ fd: Int32) -> Bool {
        guard isSocket else { return false }
        if send(fd, nil, 0, Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) == 0 { return false }
        return errno == EPIPE || errno == ENOTCONN
    }
}
