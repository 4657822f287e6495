import CSystemShims
import Synchronization

@testable import ResourceKit
@testable import ResourceKitIO

#if canImport(Glibc)
import Glibc
#endif

/// A real pipe as a managed resource: operations wait on the read end through the reactor.
final class PipeResource: ManagedResource {
    static let kind = ResourceKind(name: "test.pipe", closeTimeout: .seconds(2))

    let readFD: Int32
    let writeFD: Int32
    /// Inode of the pipe, to find it in /proc/self/fd.
    let inode: UInt64
    let cancelCount = Atomic<Int>(0)
    let closeCount = Atomic<Int>(0)
    /// Set when `close()` ran: await it instead of polling ``closeCount``.
    let closed = OneShotEvent()
    let reactor: IOReactor

    init(reactor: IOReactor = .shared) throws {
        var fds: [Int32] = [0, 0]
        guard rk_pipe_nonblocking(&fds) == 0 else { throw SystemError.current("pipe2") }
        readFD = fds[0]
        writeFD = fds[1]
        var st = stat()
        fstat(readFD, &st)
        inode = UInt64(st.st_ino)
        self.reactor = reactor
    }

    func cancel() {
        cancelCount.add(1, ordering: .relaxed)
    }

    func close() async throws {
        let previous = closeCount.add(1, ordering: .relaxed).oldValue
        defer { closed.set() }
        precondition(previous == 0, "closed twice")
        reactor.descriptorWillClose(readFD)
        Syscall.close(readFD)
        Syscall.close(writeFD)
    }

    /// Makes the read end readable.
    func writeByte() {
        var byte: UInt8 = 1
        _ = Glibc.write(writeFD, &byte, 1)
    }

    /// Reads one byte, waiting through the reactor.
    func readByte(boundTo handle: ResourceHandle?) async throws -> UInt8 {
        var byte: UInt8 = 0
        while true {
            let n = Glibc.read(readFD, &byte, 1)
            if n == 1 { return byte }
            if n == 0 { throw SystemError("read", errno: 0) }
            let error = rk_errno()
            guard error == EAGAIN else { throw SystemError("read", errno: error) }
            try await reactor.wait(for: readFD, .readable, boundTo: handle)
        }
    }
}
