import ResourceKit
import ResourceKitIO

#if canImport(Glibc)
import Glibc
#endif

/// An IPv4, IPv6 or Unix-domain socket address.
public struct SocketAddress: Sendable, Hashable, CustomStringConvertible {
    /// The address family.
    public enum Family: Sendable, Hashable { case ipv4, ipv6, unix }

    public let family: Family
    /// The raw `sockaddr_*` bytes.
    let storage: [UInt8]

    init(family: Family, storage: [UInt8]) {
        self.family = family
        self.storage = storage
    }

    init?(_ pointer: UnsafePointer<sockaddr>, length: socklen_t) {
        let bytes = Array(UnsafeRawBufferPointer(start: pointer, count: Int(length)))
        switch Int32(pointer.pointee.sa_family) {
        case AF_INET: self.init(family: .ipv4, storage: bytes)
        case AF_INET6: self.init(family: .ipv6, storage: bytes)
        case AF_UNIX: self.init(family: .unix, storage: bytes)
        default: return nil
        }
    }

    /// A Unix-domain address.
    /// - Throws: ``SocketError/Code/invalidAddress`` if the path does not fit `sun_path`.
    public static func unix(path: String) throws -> SocketAddress {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard !bytes.isEmpty, bytes.count < capacity else {
            throw SocketError(.invalidAddress, call: "unix path", errno: ENAMETOOLONG)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
        }
        let storage = withUnsafeBytes(of: &address) { Array($0) }
        return SocketAddress(family: .unix, storage: storage)
    }

    /// A numeric IPv4 or IPv6 address, without resolution; `nil` if `host` is not numeric.
    public static func numeric(host: String, port: Int) -> SocketAddress? {
        guard (0...65_535).contains(port) else { return nil }
        var v4 = sockaddr_in()
        if inet_pton(AF_INET, host, &v4.sin_addr) == 1 {
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = UInt16(port).bigEndian
            return SocketAddress(family: .ipv4, storage: withUnsafeBytes(of: &v4) { Array($0) })
        }
        var v6 = sockaddr_in6()
        if inet_pton(AF_INET6, host, &v6.sin6_addr) == 1 {
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = UInt16(port).bigEndian
            return SocketAddress(family: .ipv6, storage: withUnsafeBytes(of: &v6) { Array($0) })
        }
        return nil
    }

    /// Resolves `host` (numeric addresses without a lookup; names with `getaddrinfo` on the blocking pool).
    ///
    /// Cancellation: the lookup is a blocking-pool job; cancelling the task (or passing a deadline that
    /// passes) resumes the caller at once and the lookup's result is discarded.
    /// - Throws: ``SocketError/Code/resolutionFailed``, ``SocketError/Code/invalidAddress`` (port out of range).
    public static func resolve(host: String, port: Int, deadline: ContinuousClock.Instant? = nil) async throws
        -> [SocketAddress]
    {
        guard (0...65_535).contains(port) else {
            throw SocketError(.invalidAddress, call: "port", errno: EINVAL)
        }
        if let numeric = numeric(host: host, port: port) { return [numeric] }
        return try await BlockingPool.shared.run(deadline: deadline) {
            var hints = addrinfo()
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            hints.ai_family = AF_UNSPEC
            var result: UnsafeMutablePointer<addrinfo>?
            let status = getaddrinfo(host, String(port), &hints, &result)
            guard status == 0, let first = result else {
                throw SocketError(.resolutionFailed, call: "getaddrinfo", errno: status)
            }
            defer { freeaddrinfo(first) }
            var addresses: [SocketAddress] = []
            var cursor: UnsafeMutablePointer<addrinfo>? = first
            while let info = cursor {
                if let sa = info.pointee.ai_addr, let address = SocketAddress(sa, length: info.pointee.ai_addrlen),
                    !addresses.contains(address)
                {
                    addresses.append(address)
                }
                cursor = info.pointee.ai_next
            }
            guard !addresses.isEmpty else {
                throw SocketError(.resolutionFailed, call: "getaddrinfo", errno: 0)
            }
            return addresses
        }
    }

    /// The port, for IP addresses.
    public var port: Int? {
        switch family {
        case .ipv4: return storage.withUnsafeBytes { Int(UInt16(bigEndian: $0.load(as: sockaddr_in.self).sin_port)) }
        case .ipv6: return storage.withUnsafeBytes { Int(UInt16(bigEndian: $0.load(as: sockaddr_in6.self).sin6_port)) }
        case .unix: return nil
        }
    }

    var domain: Int32 {
        switch family {
        case .ipv4: return AF_INET
        case .ipv6: return AF_INET6
        case .unix: return AF_UNIX
        }
    }

    func withSockAddr<T>(_ body: (UnsafePointer<sockaddr>, socklen_t) throws -> T) rethrows -> T {
        try storage.withUnsafeBytes { raw in
            try body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
        }
    }

    public var description: String {
        switch family {
        case .ipv4:
            var address = storage.withUnsafeBytes { $0.load(as: sockaddr_in.self) }
            var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
            inet_ntop(AF_INET, &address.sin_addr, &text, socklen_t(text.count))
            return "\(Self.text(text)):\(port ?? 0)"
        case .ipv6:
            var address = storage.withUnsafeBytes { $0.load(as: sockaddr_in6.self) }
            var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            inet_ntop(AF_INET6, &address.sin6_addr, &text, socklen_t(text.count))
            return "[\(Self.text(text))]:\(port ?? 0)"
        case .unix:
            return "unix socket"
        }
    }

    private static func text(_ chars: [CChar]) -> String {
        String(decoding: chars.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The Unix path, for Unix-domain addresses.
    var unixPath: String? {
        guard family == .unix else { return nil }
        return storage.withUnsafeBytes { raw in
            var address = raw.load(as: sockaddr_un.self)
            return withUnsafeBytes(of: &address.sun_path) {
                String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
        }
    }
}
