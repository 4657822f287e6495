import CLibPQ
public import ResourceKit
import ResourceKitIO

extension PostgresConnection {
    /// Connects with libpq's non-blocking API (`PQconnectStartParams` / `PQconnectPoll`) through the reactor,
    /// then verifies which backend it reached (one round trip, see ``PostgresBackendIdentity``).
    ///
    /// Host *names* are resolved on the blocking pool and handed to libpq as `hostaddr` beside `host` (TLS
    /// verification and `.pgpass` still see the name), so no `getaddrinfo` runs on the cooperative pool.
    /// Multi-host lists (`host=a,b`) keep working: each name's addresses are tried in order.
    ///
    /// `connect_timeout` keeps libpq's meaning (libpq's non-blocking API ignores it; this adapter does not): it
    /// bounds each host attempt (each address of a name), values under 2 count as 2, and a host that does not
    /// complete the handshake in time (a listener that drops SYNs, a server that accepts and never answers) is
    /// given up for the next host of the list, as a refused or failed one is.
    ///
    /// - Parameters:
    ///   - conninfo: a conninfo string (`host=... port=... user=...`) or a `postgres://` URL.
    ///   - scope: the owning scope; `nil` registers the connection with the configuration's registry alone, and
    ///     the caller (a pool) must close it.
    ///   - configuration: everything else (``Configuration``): registry, reactor, blocking pool, cancel
    ///     timeout, statistics, session options, default `connect_timeout`, notice handler.
    /// Cancellation: the connection is registered before the resolution and the handshake start, so
    /// cancelling the task (or the scope, or the calling task's scope when `scope` is another, or a deadline
    /// passing) while resolving or connecting returns at once and closes the socket, including against a server
    /// that accepts and never answers. A deadline shorter than `connect_timeout` wins.
    /// - Throws: ``PostgresError`` (`invalidConfiguration` for a malformed string, `connectionTimedOut` when
    ///   every host attempt ran out of `connect_timeout`, `connection` for other failures: the message names
    ///   each host's failure and never contains the password), `CancellationError`, `DeadlineExceededError`.
    public static func connect(
        _ conninfo: String,
        in scope: ResourceScope?,
        configuration: Configuration = Configuration()
    ) async throws -> PostgresConnection {
        let registry = configuration.registry
        let pool = configuration.blockingPool
        try scope?.checkCancellation()
        try Task.checkCancellation()
        var info = try ConnectionInfo(conninfo)
        let interval = configuration.session.clientCheckIntervalMilliseconds
        let intervalAtStartup =
            configuration.asksCheckIntervalAtStartup && interval > 0
            && info.addStartupSetting("client_connection_check_interval", "\(interval)")
        let connection = PostgresConnection(
            reactor: configuration.reactor,
            pool: pool,
            cancelTimeout: configuration.cancelTimeout,
            statistics: configuration.statistics,
            session: configuration.session,
            onNotice: configuration.onNotice
        )
        let handle: ResourceHandle
        if let scope {
            handle = try await scope.register(connection, kind: kind, label: "postgres")
        } else {
            handle = try registry.register(connection, kind: kind, label: "postgres (pooled)")
        }
        connection.attach(handle)
        do {
            let resolved = try await info.resolvingHostNames(on: pool, boundTo: handle)
            try handle.checkCancellation()
            let plan = ConnectAttempts(resolved, defaultTimeout: configuration.connectTimeout)
            try await connection.open(plan, handle: handle, password: info.password)
            try await connection.verifyBackend(intervalAtStartup: intervalAtStartup)
            try await connection.watchForVanishingWithoutCancelKey()
            connection.state.withLock { $0.machine.markSessionFresh() }  // its own setup is what a reset keeps
        } catch {
            await handle.close()
            throw error
        }
        return connection
    }

    /// Runs the handshake: libpq's own walk of the host list when there is no timeout, else one bounded attempt
    /// per host (``ConnectAttempts``).
    private func open(_ plan: ConnectAttempts, handle: ResourceHandle, password: String?) async throws {
        guard let timeout = plan.timeout else {
            try start(plan.attempts[0])
            try await poll(handle: handle, password: password)
            return
        }
        var failures: [String] = []
        var timedOut = 0
        for attempt in plan.attempts {
            let deadline = ContinuousClock.now + timeout
            do {
                // The attempt's own deadline ends its waits at the operation level: the handle lives on.
                try await withResourceOperation(boundTo: nil, deadline: deadline, onCancel: { _ in }) {
                    try start(attempt)
                    try await poll(handle: handle, password: password)
                }
                if !failures.isEmpty { handle.report("postgres.connect.failedOver") }
                return
            } catch let error as DeadlineExceededError where error.deadline == deadline {
                timedOut += 1
                failures.append("\(ConnectAttempts.target(of: attempt)): timeout expired after \(timeout)")
            } catch let error as PostgresError where error.code == .connection {
                failures.append(error.message)
            }
            abandonAttempt()
        }
        let code: PostgresError.Code = timedOut == plan.attempts.count ? .connectionTimedOut : .connection
        throw PostgresError(code, "could not connect: " + failures.joined(separator: "; "))
    }

    /// Ends a host attempt that failed or timed out, so that the next one starts from nothing.
    private func abandonAttempt() {
        let conn = state.withLock { state -> LibPQConnection? in
            defer { state.conn = nil }
            if let live = state.conn?.socket, live >= 0 { reactor.descriptorWillClose(live) }
            return state.conn
        }
        if let conn { conn.finish() }
    }

    private func start(_ info: ConnectionInfo) throws {
        guard let conn = info.withParameterArrays(LibPQConnection.start) else {
            throw PostgresError(.connection, "out of memory starting a connection")
        }
        // Before anything can arrive: libpq's default receiver would print to stderr.
        notices.install(on: conn)
        let failed = state.withLock { state -> Bool in
            state.conn = conn
            return conn.status() == CONNECTION_BAD
        }
        if failed {
            let message = ConnectionInfo.scrub(String(cString: conn.errorMessage()), password: info.password)
            throw PostgresError(.connection, message)
        }
    }

    private func poll(handle: ResourceHandle, password: String?) async throws {
        while true {
            let (status, socket, message) = try state.withLock { state -> (PostgresPollingStatusType, Int32, String?) in
                guard let conn = state.conn else { throw PostgresError(.connection, "the connection was closed") }
                let status = conn.connectPoll()
                let message = status == PGRES_POLLING_FAILED ? String(cString: conn.errorMessage()) : nil
                if status == PGRES_POLLING_OK {
                    conn.setnonblocking(1)
                    let pid = conn.backendPID()
                    // No BackendKeyData (some proxies strip it): a cancel request could carry no key.
                    let key = pid == 0 ? nil : conn.getCancel().map(PGCancelPointer.init)
                    state.machine.keyLearned(pid: pid, cancel: key)
                }
                return (status, conn.socket, message)
            }
            notices.deliver(reportingTo: handle)
            switch status {
            case PGRES_POLLING_OK:
                return
            case PGRES_POLLING_FAILED:
                throw PostgresError(
                    .connection, ConnectionInfo.scrub(message ?? "connection failed", password: password))
            case PGRES_POLLING_READING:
                try await reactor.wait(for: socket, .readable, boundTo: handle)
            default:
                try await reactor.wait(for: socket, .writable, boundTo: handle)
            }
        }
    }

    /// Without BackendKeyData no cancel request can reach this session: a cancel then shuts the connection
    /// down instead. So that the server stops the running query when that happens (rather than when the query
    /// next writes), the session asks to have its client checked every 250 ms
    /// (`client_connection_check_interval`, PostgreSQL 14 and later; older servers ignore the request).
    private func watchForVanishingWithoutCancelKey() async throws {
        guard state.withLock({ $0.machine.backendKey.pid == 0 }) else { return }
        do {
            try await executeInternally("SET client_connection_check_interval = 250")
            let restoring = ["SET client_connection_check_interval = 250"]
            state.withLock { $0.machine.sessionSettingsApplied(restoring: restoring) }
        } catch let error as PostgresError where error.code == .server {
            handle?.report("postgres.connection.noVanishCheck")
        }
    }

    /// Asks the server which backend this is. A server that cannot say (a pooler's admin console, a
    /// Postgres-compatible server without these functions) leaves the identity unknown: the fast cancel path
    /// stays off for this connection and ``backendPID`` is `nil`.
    ///
    /// The same round trip asks a verified backend to watch for a vanished client
    /// (``PostgresSessionOptions/clientCheckInterval``). `intervalAtStartup`: the startup packet asked for it
    /// already, as the session's default, which a pool's session reset keeps: then there is nothing to restore.
    private func verifyBackend(intervalAtStartup: Bool) async throws {
        let keyPID = state.withLock { $0.machine.backendKey.pid }
        var identity: PostgresBackendIdentity?
        do {
            let interval = session.clientCheckIntervalMilliseconds
            if let row = try await executeInternally(PostgresBackendIdentity.probe, [keyPID, interval]).rows.first {
                identity = try PostgresBackendIdentity.verified(keyPID: keyPID, row: row)
                if interval > 0, try row.decode(Bool?.self, at: 4) != true {
                    handle?.report("postgres.connection.noVanishCheck")
                } else if interval > 0 {
                    let restoring = intervalAtStartup ? [] : ["SET client_connection_check_interval = \(interval)"]
                    state.withLock { $0.machine.sessionSettingsApplied(restoring: restoring) }
                }
            }
        } catch let error as PostgresError where error.code == .server || error.code == .decoding {
            identity = nil
        }
        state.withLock { $0.machine.backendVerified(identity) }
    }
}
