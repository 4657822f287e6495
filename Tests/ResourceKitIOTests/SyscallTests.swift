import Synchronization
import Testing

@testable import ResourceKit
import ResourceKitObservation
@testable import ResourceKitIO

#if canImport(Glibc)
import Glibc
#endif

/// The typed system-call API adapters use instead of the C shim.
@Suite struct SyscallTests {
    @Test func nonBlockingReturnsNilWhenTheCallWouldBlock() throws {
        let pipe = try Syscall.makeNonBlockingPipe()
        defer {
            Syscall.close(pipe.read)
            Syscall.close(pipe.write)
        }
        var byte: UInt8 = 0
        #expect(try Syscall.nonBlocking("read") { Glibc.read(pipe.read, &byte, 1) } == nil)
        var one: UInt8 = 7
        #expect(try Syscall.nonBlocking("write") { Glibc.write(pipe.write, &one, 1) } == 1)
        #expect(try Syscall.nonBlocking("read") { Glibc.read(pipe.read, &byte, 1) } == 1)
        #expect(byte == 7)
    }

    @Test func otherFailuresThrowSystemErrorWithTheCallAndErrno() {
        var byte: UInt8 = 0
        #expect(throws: SystemError("read", errno: EBADF)) {
            try Syscall.nonBlocking("read") { Glibc.read(-1, &byte, 1) }
        }
        #expect(throws: SystemError("inotify_add_watch", errno: ENOENT)) {
            try Syscall.watchFileChanges(path: "/nonexistent/resourcekit-test")
        }
    }

    @Test func acceptNonBlockingReturnsNilWithNoPendingConnection() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        defer { Syscall.close(fd) }
        try Syscall.setSocketOption(fd, level: SOL_SOCKET, name: SO_REUSEADDR, value: 1)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        #expect(bound == 0)
        #expect(listen(fd, 1) == 0)
        #expect(try Syscall.acceptNonBlocking(fd) == nil)
    }
}
