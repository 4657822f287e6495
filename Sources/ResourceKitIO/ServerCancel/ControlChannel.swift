import ResourceKit

/// The second connection that stops are sent on (Docs/Architecture.md, "Stopping work on a server"): one warm
/// control connection, opened on first need and again (with a backoff from 100 ms up to 5 s) whenever it died,
/// used by one stop at a time, and closed with its owner. The Postgres adapter's cancel channel and the Redis
/// example's kill connection are both one.
///
/// A stop that cannot use the connection now (none open yet, busy with another stop, dead, verified on another
/// server, or refused for want of privilege) is told so at once, and takes its owner's fallback (Postgres: a cancel
/// request) or is sent again at the next re-send (``ServerStop``).
///
/// `Server` is what a control connection is verified to reach (a Postgres cluster's identity): a stop names the
/// server of the work it stops, and only a connection verified on that server takes it. A channel whose
/// connections all reach the resource's one server uses ``SameServer``.
///
/// Work the channel starts (a stop's command, a reconnect) is owned by it and awaited by ``close()``.
public final class ControlChannel<Connection: AnyObject & Sendable, Server: Equatable & Sendable>: Sendable {
    /// What a stop's command found.
    public enum CommandOutcome: Sendable {
        /// The command ran (whatever it stopped).
        case ran
        /// The server refuses this connection's stops, and will refuse every other: the channel stops taking
        /// stops (its owner's fallback takes them all) and opens no new connection.
        case refused
    }

    private typealias Machine = ControlChannelStateMachine<Connection, Server>
    /// The channel's decisions (``ControlChannelStateMachine``), made under this lock and acted on after it.
    private let state: Locked<Machine>
    private let work = OwnedTasks()
    private let reconnect: (@Sendable () async throws -> (Connection, Server?))?
    private let closeConnection: @Sendable (Connection) async -> Void
    private let isBroken: @Sendable (Connection) -> Bool

    /// A channel over `control`, a connection used for nothing else. A control connection that dies is not
    /// replaced.
    /// - Parameters:
    ///   - control: the control connection, which the channel now owns and closes.
    ///   - server: what `control` is verified to reach (`nil`: unverified, of no use to a stop, but still owned and
    ///     closed).
    ///   - close: closes a control connection (the channel's close, a dead one dropped).
    ///   - isBroken: whether a connection is dead; asked under the channel's lock, so it must not block.
    public init(
        control: Connection, server: Server?, close: @escaping @Sendable (Connection) async -> Void,
        isBroken: @escaping @Sendable (Connection) -> Bool
    ) {
        reconnect = nil
        closeConnection = close
        self.isBroken = isBroken
        state = Locked(Machine(control: (control, server), canReconnect: false, now: .now))
    }

    /// A channel that opens its control connection with `connect` (which returns it with the server it is verified
    /// on) on first need, and again whenever it died.
    public init(
        connect: @escaping @Sendable () async throws -> (Connection, Server?),
        close: @escaping @Sendable (Connection) async -> Void,
        isBroken: @escaping @Sendable (Connection) -> Bool
    ) {
        reconnect = connect
        closeConnection = close
        self.isBroken = isBroken
        state = Locked(Machine(control: nil, canReconnect: true, now: .now))
    }

    /// The control connection, if one is open (for the owner's descriptor list).
    public var current: Connection? { state.withLock { $0.control } }

    /// The server the control connection is verified to reach, if any.
    public var server: Server? { state.withLock { $0.server } }

    /// A stop for work on `server` is about to be tried: a control connection that is idle and verified on
    /// *another* server may be one a restart of its server left dead. Look at it without waiting (marking it broken
    /// if so) before ``tryStart(on:_:)``, so that it is dropped and a verified one opened, rather than kept forever.
    public func connectionToLookAt(before server: Server) -> Connection? {
        state.withLock { $0.controlToLookAt(before: server) }
    }

    /// Starts `command` on the control connection, on a task the channel owns, when the connection is open, idle,
    /// alive and verified on `server`. Returns `false` (and never runs `command`) when it cannot now; a dead
    /// connection is then dropped and, past the backoff, a new one opened. Non-blocking: safe from a cancel path.
    public func tryStart(on server: Server, _ command: @escaping @Sendable (Connection) async -> CommandOutcome)
        -> Bool
    {
        let action = state.withLock { $0.tryStart(on: server, isBroken: isBroken, now: .now) }
        switch action {
        case .cannot(let dead, let reconnect):
            if dead != nil || reconnect {
                work.start {
                    if let dead { await self.closeConnection(dead) }
                    if reconnect { await self.reconnectControl() }
                }
            }
            return false
        case .start(let control):
            work.start {
                let outcome = await command(control)
                self.state.withLock { $0.commandEnded(disable: outcome == .refused) }
            }
            return true
        }
    }

    /// Runs `command` on the control connection and returns its result; `nil` when it cannot now (as
    /// ``tryStart(on:_:)``), after waiting for a connection being opened. For a ``ServerStop``'s `stop`, which must
    /// return once the server answered.
    ///
    /// Cancellation: `command` runs on the channel's task whatever happens to the caller; a cancelled caller stops
    /// waiting for it.
    public func run<Result: Sendable>(
        on server: Server, _ command: @escaping @Sendable (Connection) async -> Result
    ) async -> Result? {
        // The first stop opens the connection itself rather than finding it absent and leaving it to a re-send.
        if current == nil { await connectIfNeeded() }
        for attempt in 0..<2 {
            let result = Locked<Result?>(nil)
            let done = OneShotEvent()
            let started = tryStart(on: server) { connection in
                let value = await command(connection)
                result.withLock { $0 = value }
                done.set()
                return .ran
            }
            if started {
                try? await done.wait()
                return result.withLock { $0 }
            }
            if attempt == 0 { await connectIfNeeded() }
        }
        return nil
    }

    private func reconnectControl() async {
        var made: (Connection, Server?)?
        do {
            made = try await reconnect?()
        } catch {
            made = nil
        }
        let toClose = state.withLock { $0.reconnectEnded(made, now: .now) }
        for connection in toClose { await closeConnection(connection) }
    }

    /// Opens the control connection now if there is none and the channel can reconnect (an owner calls it when it
    /// opens a connection, so that the first stop already finds it). Returns when the attempt ended; does nothing
    /// while another attempt is under way, or within the backoff after a failed one.
    public func connectIfNeeded() async {
        if state.withLock({ $0.connectIfNeeded(isBroken: isBroken, now: .now) }) { await reconnectControl() }
    }

    /// Closes the control connection after the work in progress ended (a reconnect that ends meanwhile closes
    /// what it made).
    public func close() async {
        let control = state.withLock { $0.close() }
        await work.waitForAll()
        if let control { await closeConnection(control) }
    }
}

extension ControlChannel where Server == SameServer {
    /// A channel whose connections all reach the one server its owner uses: opened with `connect` on first need.
    public convenience init(
        connect: @escaping @Sendable () async throws -> Connection,
        close: @escaping @Sendable (Connection) async -> Void,
        isBroken: @escaping @Sendable (Connection) -> Bool
    ) {
        self.init(connect: { (try await connect(), SameServer()) }, close: close, isBroken: isBroken)
    }

    /// ``run(on:_:)`` on the one server.
    public func run<Result: Sendable>(_ command: @escaping @Sendable (Connection) async -> Result) async -> Result? {
        await run(on: SameServer(), command)
    }
}

/// The server of a ``ControlChannel`` whose connections all reach the same one (no verification).
public struct SameServer: Hashable, Sendable {
    public init() {}
}
