#if canImport(Glibc)
import Glibc
#endif

/// A TCP socket bound to 127.0.0.1 on a port the kernel picked: for a port that refuses (bound, not
/// listening) or a listener that accepts and never answers (`listen` given).
public struct LoopbackPort: ~Copyable {
    public let fd: Int32
    public let port: Int

    /// Binds a socket to 127.0.0.1:0; listens with `backlog` if given.
    public init(listen backlog: Int32? = nil) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        if let backlog { _ = Glibc.listen(fd, backlog) }
        self.fd = fd
        self.port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(fd) }
}
