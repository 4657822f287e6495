#if canImport(Glibc)
import Glibc
#endif

/// Descriptors of this process, from /proc/self/fd.
public enum ProcFD {
    /// Every descriptor's link target (`pipe:[123]`, `socket:[456]`, a path).
    public static func links() -> [String] {
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

    /// Number of open descriptors.
    public static var count: Int { links().count }

    /// Open sockets, pipes and files: what a leaked resource would hold. Leaves out the runtime's own
    /// `anon_inode` descriptors (epoll, eventfd, timerfd, signalfd), which libdispatch and the reactor create
    /// lazily on first use.
    public static var resourceCount: Int { links().filter { !$0.hasPrefix("anon_inode:") }.count }

    /// How many of the given pipe inodes are still open in this process.
    public static func openPipes(_ inodes: Set<UInt64>) -> Int {
        links().filter { link in
            guard link.hasPrefix("pipe:["), let ino = UInt64(link.dropFirst(6).dropLast()) else { return false }
            return inodes.contains(ino)
        }.count
    }

    /// The inode of `fd` (to find it later in ``links()`` as `pipe:[inode]` or `socket:[inode]`).
    public static func inode(of fd: Int32) -> UInt64 {
        var info = stat()
        fstat(fd, &info)
        return UInt64(info.st_ino)
    }

    /// How many of the given socket inodes are still open in this process.
    public static func openSockets(_ inodes: Set<UInt64>) -> Int {
        links().filter { link in
            guard link.hasPrefix("socket:["), let ino = UInt64(link.dropFirst(8).dropLast()) else { return false }
            return inodes.contains(ino)
        }.count
    }
}
