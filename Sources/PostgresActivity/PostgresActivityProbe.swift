public import PostgresAdapter
import ResourceKit

/// What `pg_stat_activity` says, seen from an observer connection: is server-side work still running? The
/// one probe of the package (the demo, the benchmark, the tests, an adapter kit's "external work stopped"
/// check). Every wait polls with a pause between queries and ends within a bound.
///
/// ```swift
/// let probe = PostgresActivityProbe(observer: observer)
/// task.cancel()
/// let stoppedAfter = try await probe.waitUntil(.notActive(.pid(pid)), within: .seconds(1))
/// #expect(stoppedAfter != nil, "the query still runs on the server")
/// ```
///
/// Behind a pooler or a balancer, point the observer at the real server: only the server's own view tells
/// the truth. The observer's own backend is never matched.
public struct PostgresActivityProbe: Sendable {
    /// Which backends a question is about.
    public enum Backends: Sendable, Hashable {
        /// The backend with this process id.
        case pid(Int32)
        /// Backends whose current (or last) statement contains this text, such as a marker comment;
        /// only those connected with `application` as their `application_name`, if given.
        case running(String, application: String? = nil)
        /// Backends connected with this `application_name`.
        case application(String)
    }

    /// A condition to wait for.
    public enum Condition: Sendable, Hashable {
        /// At least one matching backend is active (running a statement).
        case active(Backends)
        /// No matching backend is active (idle, or gone).
        case notActive(Backends)
        /// At least one matching backend exists, in any state (a session that ran `LISTEN`, idle since).
        case present(Backends)
        /// No matching backend exists at all (every such connection closed).
        case gone(Backends)
    }

    /// The connection the questions go through.
    public let observer: PostgresConnection
    /// The pause between two polls.
    public let pollInterval: Duration

    /// A probe asking through `observer`, pausing `pollInterval` between polls (`.zero` polls back to back:
    /// for measurements that must not be coarser than one round trip).
    public init(observer: PostgresConnection, pollInterval: Duration = .milliseconds(1)) {
        self.observer = observer
        self.pollInterval = pollInterval
    }

    /// The `state` of backend `pid` (`active`, `idle`, `idle in transaction`, ...), or `nil` when it is gone.
    ///
    /// Cancellation: as `PostgresConnection.query(_:_:)` on the observer.
    public func state(of pid: Int32) async throws -> String? {
        try await observer.query("SELECT state FROM pg_stat_activity WHERE pid = $1", [Int(pid)]).first?.decode(
            String?.self, at: 0)
    }

    /// The process ids of the matching backends (only the active ones unless `activeOnly` is `false`).
    ///
    /// Cancellation: as `PostgresConnection.query(_:_:)` on the observer.
    public func backends(_ which: Backends, activeOnly: Bool = true) async throws -> [Int32] {
        let (predicate, parameters): (String, [any PostgresEncodable]) =
            switch which {
            case .pid(let pid): ("pid = $1", [Int(pid)])
            case .running(let text, nil): ("strpos(query, $1) > 0", [text])
            case .running(let text, let application?):
                ("strpos(query, $1) > 0 AND application_name = $2", [text, application])
            case .application(let name): ("application_name = $1", [name])
            }
        let sql =
            "SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND \(predicate)"
            + (activeOnly ? " AND state = 'active'" : "")
        return try await observer.query(sql, parameters).map { try $0.decode(Int32.self, at: 0) }
    }

    /// Polls until `condition` holds, or `bound` passed.
    ///
    /// Cancellation: throws `CancellationError` at once when the calling task is cancelled.
    /// - Returns: how long it took, or `nil` if the condition still did not hold after `bound`.
    @discardableResult
    public func waitUntil(_ condition: Condition, within bound: Duration) async throws -> Duration? {
        try await Self.poll(every: pollInterval, within: bound) {
            switch condition {
            case .active(let which): try await !backends(which).isEmpty
            case .notActive(let which): try await backends(which).isEmpty
            case .present(let which): try await !backends(which, activeOnly: false).isEmpty
            case .gone(let which): try await backends(which, activeOnly: false).isEmpty
            }
        }
    }

    /// Runs `check` until it returns `true`, pausing `interval` between runs, for at most `bound`: the poll
    /// loop behind ``waitUntil(_:within:)``, for questions that span several observers.
    ///
    /// Cancellation: throws `CancellationError` at once when the calling task is cancelled.
    /// - Returns: how long it took, or `nil` if `check` never returned `true` within `bound`.
    public static func poll(
        every interval: Duration,
        within bound: Duration,
        _ check: () async throws -> Bool
    ) async throws -> Duration? {
        let start = ContinuousClock.now
        while true {
            if try await check() { return ContinuousClock.now - start }
            if ContinuousClock.now - start >= bound { return nil }
            if interval > .zero {
                try await Task.sleep(for: interval)
            } else {
                try Task.checkCancellation()
            }
        }
    }
}
