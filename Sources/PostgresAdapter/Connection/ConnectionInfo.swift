import CLibPQ
import Foundation
import ResourceKit
import ResourceKitIO

#if canImport(Glibc)
import Glibc
#endif

/// A parsed conninfo string or `postgres://` URL: validated with libpq, never echoed (it may hold a password).
struct ConnectionInfo: Sendable {
    /// Every keyword libpq recognised, with the values set (defaults from the environment included).
    private(set) var parameters: [(keyword: String, value: String)]

    /// The password, to scrub it from libpq's messages.
    var password: String? { value(of: "password") }

    /// Parses `conninfo` or throws ``PostgresError/Code/invalidConfiguration`` (the message names no part of it).
    init(_ conninfo: String) throws {
        var errorMessage: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(conninfo, &errorMessage) else {
            if let errorMessage { PQfreemem(errorMessage) }
            throw PostgresError(.invalidConfiguration, "malformed connection string or URL")
        }
        defer { PQconninfoFree(options) }
        var parameters: [(String, String)] = []
        var cursor = options
        while let keyword = cursor.pointee.keyword {
            if let value = cursor.pointee.val {
                parameters.append((String(cString: keyword), String(cString: value)))
            }
            cursor += 1
        }
        self.parameters = parameters
    }

    func value(of keyword: String) -> String? {
        parameters.last { $0.keyword == keyword }?.value
    }

    mutating func set(_ keyword: String, _ value: String) {
        parameters.removeAll { $0.keyword == keyword }
        parameters.append((keyword, value))
    }

    /// Adds `-c name=value` to the startup packet's `options`, after the conninfo's own (or after `PGOPTIONS`,
    /// which libpq reads only when the conninfo sets no `options`). `value` holds no space or backslash. Returns
    /// `false` and changes nothing when the conninfo names a service (`service`, or `PGSERVICE`) and sets no
    /// `options`: the service file may set them, and an `options` here would replace the service's.
    mutating func addStartupSetting(
        _ name: String, _ value: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> Bool {
        let own = self.value(of: "options")
        if own == nil, self.value(of: "service") != nil || environment["PGSERVICE"] != nil { return false }
        let base = own ?? environment["PGOPTIONS"] ?? ""
        let setting = "-c \(name)=\(value)"
        set("options", base.isEmpty ? setting : base + " " + setting)
        return true
    }

    /// Host *names* that libpq would resolve itself, with blocking `getaddrinfo`, inside `PQconnectPoll`.
    var hostNamesToResolve: [String] {
        guard value(of: "hostaddr")?.isEmpty ?? true, let hosts = value(of: "host") else { return [] }
        return hosts.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            .filter { !$0.isEmpty && !Self.isSocketDirectory($0) && !Self.isNumeric($0) }
    }

    /// Resolves host names on the blocking pool and hands libpq the addresses as `hostaddr`, next to `host` (so
    /// TLS verification and `.pgpass` still see the name). A name with several addresses becomes several
    /// entries, tried in order as libpq would. Returns `self` unchanged when there is nothing to resolve.
    ///
    /// Cancellation: the resolution runs on `pool`; a cancelled caller (or a cancelled `handle`) resumes at
    /// once, and the lookup's result is dropped when it arrives.
    func resolvingHostNames(on pool: BlockingPool, boundTo handle: ResourceHandle?) async throws -> ConnectionInfo {
        guard !hostNamesToResolve.isEmpty, let hostList = value(of: "host") else { return self }
        let hosts = hostList.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        let portList = value(of: "port")?.split(separator: ",", omittingEmptySubsequences: false).map(String.init) ?? []
        guard portList.count <= 1 || portList.count == hosts.count else {
            throw PostgresError(.invalidConfiguration, "the port list must have one entry or one per host")
        }
        var expandedHosts: [String] = []
        var expandedAddresses: [String] = []
        var expandedPorts: [String] = []
        for (index, host) in hosts.enumerated() {
            let port = portList.count > 1 ? portList[index] : portList.first ?? ""
            let addresses: [String]
            if host.isEmpty || Self.isSocketDirectory(host) || Self.isNumeric(host) {
                addresses = [""]  // libpq takes an empty hostaddr entry as "use host"
            } else {
                addresses = try await pool.run(boundTo: handle) { try Self.resolve(host) }
            }
            for address in addresses {
                expandedHosts.append(host)
                expandedAddresses.append(address)
                expandedPorts.append(port)
            }
        }
        var resolved = self
        resolved.set("host", expandedHosts.joined(separator: ","))
        resolved.set("hostaddr", expandedAddresses.joined(separator: ","))
        if !portList.isEmpty { resolved.set("port", expandedPorts.joined(separator: ",")) }
        return resolved
    }

    /// Blocking `getaddrinfo`: call it on the blocking pool only.
    static func resolve(_ host: String) throws -> [String] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, nil, &hints, &list)
        guard status == 0, let list else {
            // The host name is configuration, not user data: it may be named.
            throw PostgresError(
                .connection, "could not resolve host name \"\(host)\": \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(list) }
        var addresses: [String] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = list
        while let entry = cursor {
            var buffer = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            if getnameinfo(
                entry.pointee.ai_addr, entry.pointee.ai_addrlen, &buffer, socklen_t(buffer.count), nil, 0,
                NI_NUMERICHOST) == 0
            {
                let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                if !addresses.contains(text) { addresses.append(text) }
            }
            cursor = entry.pointee.ai_next
        }
        guard !addresses.isEmpty else { throw PostgresError(.connection, "host name \"\(host)\" has no address") }
        return addresses
    }

    static func isSocketDirectory(_ host: String) -> Bool { host.hasPrefix("/") || host.hasPrefix("@") }

    static func isNumeric(_ host: String) -> Bool {
        var buffer = in6_addr()
        return inet_pton(AF_INET, host, &buffer) == 1 || inet_pton(AF_INET6, host, &buffer) == 1
    }

    /// Calls `body` with NULL-terminated keyword and value arrays for `PQconnectStartParams` (`expand_dbname` 0).
    func withParameterArrays<R>(
        _ body: (UnsafePointer<UnsafePointer<CChar>?>, UnsafePointer<UnsafePointer<CChar>?>) -> R
    ) -> R {
        parameters.map(\.keyword).withCStrings { keywords in
            parameters.map(\.value).withCStrings { values in body(keywords, values) }
        }
    }

    /// libpq's message with the password (if any) removed.
    static func scrub(_ message: String, password: String?) -> String {
        var text = message.trimmingSpaces
        if let password, !password.isEmpty {
            text = text.replacingOccurrences(of: password, with: "********")
        }
        return text
    }
}

extension Array where Element == String {
    /// NULL-terminated `const char *const *` for libpq.
    func withCStrings<R>(_ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
        let duplicated = map { strdup($0) } + [nil]
        defer { duplicated.forEach { free($0) } }
        return duplicated.map { UnsafePointer($0) }.withUnsafeBufferPointer { body($0.baseAddress!) }
    }
}
