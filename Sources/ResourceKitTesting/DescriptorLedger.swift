#if canImport(Glibc)
import Glibc
#endif

/// The process's open descriptors as `fd → target` (`socket:[123]`, `pipe:[45]`, a path), from
/// `/proc/self/fd`: the one descriptor reader of the package (the kit's leak checks, the tests, the
/// benchmark). A descriptor counts as the same only if both its number and its target match, so a number
/// reused for something else is not mistaken for a leak.
public struct DescriptorLedger: Sendable, Hashable {
    /// Every open descriptor and what it refers to.
    public let entries: [Int32: String]

    /// The descriptors open now.
    public static func now() -> DescriptorLedger {
        var entries: [Int32: String] = [:]
        guard let directory = opendir("/proc/self/fd") else { return DescriptorLedger(entries: [:]) }
        defer { closedir(directory) }
        let own = dirfd(directory)
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            guard let fd = Int32(name), fd != own, let target = target(of: fd) else { continue }
            entries[fd] = target
        }
        return DescriptorLedger(entries: entries)
    }

    /// Number of open descriptors.
    public var count: Int { entries.count }

    /// Open sockets, pipes and files: what a leaked resource would hold. Leaves out `anon_inode` descriptors
    /// (epoll, eventfd, timerfd, signalfd), which libdispatch and the reactor create lazily on first use.
    public var resourceCount: Int { entries.values.filter { !$0.hasPrefix("anon_inode:") }.count }

    /// How many descriptors refer to `target` (a path, `pipe:[inode]`, `socket:[inode]`).
    public func count(of target: String) -> Int { entries.values.filter { $0 == target }.count }

    /// Descriptors in `self` that were not in `earlier`.
    public func opened(since earlier: DescriptorLedger) -> [Int32: String] {
        entries.filter { earlier.entries[$0.key] != $0.value }
    }

    /// Which of `descriptors` (number → what it pointed to) are still open on the same target, looked up now,
    /// one `readlink` each: fast enough to run the moment a `close()` returned, before a close that was only
    /// handed to another thread has had time to happen.
    public static func stillOpen(_ descriptors: [Int32: String]) -> [Int32: String] {
        descriptors.filter { fd, target in Self.target(of: fd) == target }
    }

    /// What descriptor `fd` of this process points to (`/proc/self/fd`'s link), or `nil` if it is not open.
    static func target(of fd: Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: 512)
        let length = readlink("/proc/self/fd/\(fd)", &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        return String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Of `descriptors`, those still open with the same target.
    public func stillOpen(_ descriptors: [Int32: String]) -> [Int32: String] {
        descriptors.filter { entries[$0.key] == $0.value }
    }

    /// How many of the given pipe inodes are still open.
    public func openPipes(_ inodes: Set<UInt64>) -> Int { open(inodes, prefix: "pipe:[") }

    /// How many of the given socket inodes are still open.
    public func openSockets(_ inodes: Set<UInt64>) -> Int { open(inodes, prefix: "socket:[") }

    private func open(_ inodes: Set<UInt64>, prefix: String) -> Int {
        entries.values.filter { target in
            guard target.hasPrefix(prefix), let inode = UInt64(target.dropFirst(prefix.count).dropLast()) else {
                return false
            }
            return inodes.contains(inode)
        }.count
    }

    /// The inode of `fd` (to find it later as `pipe:[inode]` or `socket:[inode]`).
    public static func inode(of fd: Int32) -> UInt64 {
        var info = stat()
        fstat(fd, &info)
        return UInt64(info.st_ino)
    }

    /// Inodes of TCP sockets (IPv4 and IPv6, any process) whose local port is one of `localPorts` and, when
    /// `remotePort` is given, whose peer's port is `remotePort`, from `/proc/net/tcp` and `/proc/net/tcp6`:
    /// pass them to ``openSockets(_:)`` to ask which are still open here.
    ///
    /// Give `remotePort` whenever it is known. Linux lets connections to different destinations share an
    /// ephemeral local port, so a local port alone can also name an unrelated socket of this process (one to a
    /// pooler, or to another test's server) and report it as a leak.
    public static func socketInodes(localPorts: Set<Int>, remotePort: Int? = nil) -> Set<UInt64> {
        var inodes: Set<UInt64> = []
        for row in tcpTable() where localPorts.contains(row.localPort) {
            if let remotePort, row.remotePort != remotePort { continue }
            if row.inode != 0 { inodes.insert(row.inode) }  // 0: a TIME_WAIT entry, held by no descriptor
        }
        return inodes
    }

    /// One row of `/proc/net/tcp` or `/proc/net/tcp6`.
    public struct TCPSocketRow: Sendable, Hashable, CustomStringConvertible {
        /// The local port.
        public let localPort: Int
        /// The peer's port (`0` for a listening socket).
        public let remotePort: Int
        /// The kernel's state number (`01` established, `0A` listening, as in `/proc/net/tcp`).
        public let state: Int
        /// The socket's inode: `socket:[inode]` in `/proc/self/fd`.
        public let inode: UInt64

        /// `local → remote, state, inode`.
        public var description: String {
            "port \(localPort) → port \(remotePort), state \(String(state, radix: 16)), inode \(inode)"
        }
    }

    /// Every TCP socket of the network namespace (any process), from `/proc/net/tcp` and `/proc/net/tcp6`.
    public static func tcpTable() -> [TCPSocketRow] {
        var rows: [TCPSocketRow] = []
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            guard let file = fopen(table, "r") else { continue }
            defer { fclose(file) }
            var line: UnsafeMutablePointer<CChar>?
            var capacity = 0
            defer { free(line) }
            while getline(&line, &capacity, file) > 0 {
                let fields = String(cString: line!).split(separator: " ", omittingEmptySubsequences: true)
                // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
                guard fields.count > 9, let local = port(of: fields[1]), let remote = port(of: fields[2]),
                    let state = Int(fields[3], radix: 16), let inode = UInt64(fields[9])
                else { continue }
                rows.append(TCPSocketRow(localPort: local, remotePort: remote, state: state, inode: inode))
            }
        }
        return rows
    }

    /// The port of an `ADDRESS:PORT` field (hexadecimal).
    private static func port(of field: Substring) -> Int? {
        guard let colon = field.lastIndex(of: ":") else { return nil }
        return Int(field[field.index(after: colon)...], radix: 16)
    }
}
