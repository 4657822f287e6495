/// How a connect with a `connect_timeout` walks a multi-host conninfo, as libpq's blocking connect does: one
/// attempt per host entry (per address, once names are resolved), each bounded by the timeout, the next one
/// after a failure or a timeout. libpq's non-blocking API (`PQconnectPoll`) has no timeout at all, so the
/// adapter makes each attempt a single-host connection of its own (Docs/Architecture.md, "Every wait has a
/// bound").
struct ConnectAttempts: Sendable {
    /// libpq's `connect_timeout`: per attempt; `nil` (unset, zero or negative) waits as long as the caller does.
    /// Values under two seconds count as two, as in libpq.
    let timeout: Duration?
    /// The single-host conninfos to try, in order.
    let attempts: [ConnectionInfo]

    init(_ info: ConnectionInfo, defaultTimeout: Duration? = nil) {
        let configured = info.value(of: "connect_timeout").flatMap { Int($0.trimmingSpaces) }
        switch configured {
        case let seconds? where seconds > 0: timeout = .seconds(max(2, seconds))
        case .some: timeout = nil  // zero or negative: wait indefinitely, the caller's choice
        case nil: timeout = defaultTimeout
        }
        attempts = timeout == nil ? [info] : Self.split(info)
    }

    /// One conninfo per host entry. `prefer-standby` (libpq 14+) becomes two passes, as libpq makes them: every
    /// host as `standby` first, then every host as `any`.
    static func split(_ info: ConnectionInfo) -> [ConnectionInfo] {
        let hosts = list(info.value(of: "host"))
        let addresses = list(info.value(of: "hostaddr"))
        let ports = list(info.value(of: "port"))
        let count = max(hosts.count, addresses.count)
        guard count > 1 else { return passes([info], info) }
        var attempts: [ConnectionInfo] = []
        for index in 0..<count {
            var attempt = info
            if !hosts.isEmpty { attempt.set("host", hosts.count == count ? hosts[index] : hosts[0]) }
            if !addresses.isEmpty {
                attempt.set("hostaddr", addresses.count == count ? addresses[index] : addresses[0])
            }
            if !ports.isEmpty { attempt.set("port", ports.count == count ? ports[index] : ports[0]) }
            attempts.append(attempt)
        }
        return passes(attempts, info)
    }

    private static func passes(_ attempts: [ConnectionInfo], _ info: ConnectionInfo) -> [ConnectionInfo] {
        guard info.value(of: "target_session_attrs") == "prefer-standby" else { return attempts }
        let standby = attempts.map { attempt in
            var attempt = attempt
            attempt.set("target_session_attrs", "standby")
            return attempt
        }
        let any = attempts.map { attempt in
            var attempt = attempt
            attempt.set("target_session_attrs", "any")
            return attempt
        }
        return standby + any
    }

    private static func list(_ value: String?) -> [String] {
        guard let value, !value.isEmpty else { return [] }
        return value.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
    }

    /// Where an attempt went, for the error message (configuration, never user data or a password).
    static func target(of info: ConnectionInfo) -> String {
        let host = info.value(of: "hostaddr").flatMap { $0.isEmpty ? nil : $0 } ?? info.value(of: "host") ?? "default"
        return "\(host):\(info.value(of: "port") ?? "5432")"
    }
}
