import Foundation
import ResourceKit
import ResourceKitIO

#if canImport(Glibc)
import Glibc
#endif

/// A loopback port for a server that starts a moment later.
///
/// A port the kernel picks (`bind` to port 0) comes from the ephemeral range, the same range every outgoing
/// connection on the machine takes its local port from: between the pick and the server's own `bind`, a client
/// connection can take it, and the server fails with "address already in use". Ports below the ephemeral range
/// are never handed to outgoing connections, so a random free one there stays free unless another server picks the
/// very same port at the same moment.
public enum ServerPort {
    /// The lowest port picked.
    static let lowest = 20_000

    /// A random port below the ephemeral range that nothing is bound to now.
    public static func pickFree() throws(Failure) -> Int {
        let ceiling = min(ephemeralRangeStart() - 1, 65_535)
        guard ceiling > lowest else { throw Failure("no port range below the ephemeral ports") }
        for _ in 0..<200 {
            let port = Int.random(in: lowest...ceiling)
            if isFree(port) { return port }
        }
        throw Failure("no free loopback port found in \(lowest)...\(ceiling)")
    }

    /// Why no port was found.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// The first port of the kernel's ephemeral range (32768 when it cannot be read).
    static func ephemeralRangeStart() -> Int {
        let text = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
        return text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).first.flatMap { Int($0) }
            ?? 32_768
    }

    /// Whether 127.0.0.1:`port` can be bound now.
    static func isFree(_ port: Int) -> Bool {
        onLoopback(port) { fd, address, length in bind(fd, address, length) == 0 }
    }

    /// Whether a server accepts connections on 127.0.0.1:`port` now (a blocking `connect`: loopback answers at
    /// once).
    public static func isAcceptingConnections(_ port: Int) -> Bool {
        onLoopback(port) { fd, address, length in connect(fd, address, length) == 0 }
    }

    /// Runs `body` with a new TCP socket and the address 127.0.0.1:`port`, then closes the socket.
    private static func onLoopback(
        _ port: Int, _ body: (Int32, UnsafePointer<sockaddr>, socklen_t) -> Bool
    ) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { Syscall.close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                body(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
    }
}
