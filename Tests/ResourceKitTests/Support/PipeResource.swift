#if canImport(Glibc)
import Glibc
#endif
import CSystemShims
@testable import ResourceKit
import Synchronization

/// A real pipe as a managed resource: operations wait on the read end through the reactor.
final class PipeResource: ManagedResource {
    static let kind = ResourceKind(name: "test.pipe", closeTimeout: .seconds(2))

    let readFD: Int32
    let writeFD: Int32
    /// Inode of the pipe, to find it in /proc/self/fd.
    let inode: UInt64
    let cancelCount = Atomic<Int>(0)
    let closeCount = Atomic<Int>(0)
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

/// Descriptors of this process, from /proc/self/fd.
enum ProcFD {
    static func links() -> [String] {
        guard let dir = opendir("/proc/self/fd") else { return [] }
        defer { closedir(dir) }
        var result: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name == "." || name == ".." { continue }
            var buffer = [CChar](repeating: 0, count: 256)
            let n = readlink("/proc/self/fd/\(name)", &buffer, 255)
            if n > 0 { result.append(String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)) }
        }
        return result
    }

    static var count: Int { links().count }

    /// How many of the given pipe inodes are still open in this process.
    static func openPipes(_ inodes: Set<UInt64>) -> Int {
        links().filter { link in
            guard link.hasPrefix("pipe:["), let ino = UInt64(link.dropFirst(6).dropLast()) else { return false }
            return inodes.contains(ino)
        }.count
    }
}
