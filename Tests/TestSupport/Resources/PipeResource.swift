import CSystemShims
public import Synchronization

public import ResourceKit
public import ResourceKitIO

#if canImport(Glibc)
import Glibc
#endif

/// A real pipe as a managed resource: operations wait on the read end through the reactor.
public final class PipeResource: ManagedResource {
    public static let kind = ResourceKind(name: "test.pipe", closeTimeout: .seconds(2))

    public let readFD: Int32
    public let writeFD: Int32
    /// Inode of the pipe, to find it in /proc/self/fd.
    public let inode: UInt64
    public let cancelCount = Atomic<Int>(0)
    public let closeCount = Atomic<Int>(0)
    /// Set when `close()` ran: await it instead of polling ``closeCount``.
    public let closed = OneShotEvent()
    public let reactor: IOReactor

    public init(reactor: IOReactor = .shared) throws {
        var fds: [Int32] = [0, 0]
        guard rk_pipe_nonblocking(&fds) == 0 else { throw SystemError.current("pipe2") }
        readFD = fds[0]
        writeFD = fds[1]
        var st = stat()
        fstat(readFD, &st)
        inode = UInt64(st.st_ino)
        self.reactor = reactor
    }

    public func cancel() {
        cancelCount.add(1, ordering: .relaxed)
    }

    public func close() async throws {
        let previous = closeCount.add(1, ordering: .relaxed).oldValue
        defer { closed.set() }
        precondition(previous == 0, "closed twice")
        reactor.descriptorWillClose(readFD)
        Syscall.close(readFD)
        Syscall.close(writeFD)
    }

    /// Makes the read end readable.
    public func writeByte() {
        var byte: UInt8 = 1
        _ = Glibc.write(writeFD, &byte, 1)
    }

    /// Reads one byte, waiting through the reactor.
    public func readByte(boundTo handle: ResourceHandle?) async throws -> UInt8 {
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
