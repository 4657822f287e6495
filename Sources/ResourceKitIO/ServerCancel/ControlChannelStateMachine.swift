/// ``ControlChannel``'s decisions as a value (the channel holds it under its lock and acts after releasing it):
/// whether a stop may use the control connection now, when a dead one is dropped, when a reconnect starts and what
/// its result replaces, and what a close leaves to close. Tested without I/O (`ControlChannelStateMachineTests`).
///
/// `Connection` is a control connection, `Server` what it is verified to reach. Whether a connection is broken is
/// asked through `isBroken`, under the channel's lock (the channel's lock, then the connection's: never the other
/// way round).
struct ControlChannelStateMachine<Connection: AnyObject, Server: Equatable> {
    /// The control connection.
    struct Control {
        let connection: Connection
        /// The server it is verified to reach; `nil`: unverified (a connection given to the channel behind a
        /// pooler), which no stop uses.
        let server: Server?
        /// A stop command runs on it: one at a time.
        var busy = false
    }

    /// When a reconnect may start, and the backoff after the next failed one (100 ms, doubling, at most 5 s).
    struct Reconnect {
        var inFlight = false
        var notBefore: ContinuousClock.Instant
        var backoff: Duration = .milliseconds(100)

        mutating func failed(now: ContinuousClock.Instant) {
            notBefore = now + backoff
            backoff = min(backoff * 2, .seconds(5))
        }
    }

    enum State {
        /// Stops may use `control`, when it is live and on the server of the work to stop.
        case open(control: Control?, reconnect: Reconnect)
        /// The server refused the control connection's stops (Postgres's `42501`, no privilege): every stop takes
        /// the owner's fallback, and no reconnect starts. The connection is kept for the close.
        case disabled(control: Connection?)
        /// ``close()`` ran: nothing starts; a reconnect that ends now has its connection closed.
        case closed
    }

    private(set) var state: State
    /// Whether the channel can open control connections itself (else it only ever has the one it was given).
    let canReconnect: Bool

    init(control: (Connection, Server?)?, canReconnect: Bool, now: ContinuousClock.Instant) {
        self.canReconnect = canReconnect
        state = .open(
            control: control.map { Control(connection: $0.0, server: $0.1) }, reconnect: Reconnect(notBefore: now))
    }

    /// The control connection, whatever its state.
    var control: Connection? {
        switch state {
        case .open(let control, _): control?.connection
        case .disabled(let control): control
        case .closed: nil
        }
    }

    /// The server the control connection is verified to reach.
    var server: Server? {
        if case .open(let control?, _) = state { return control.server }
        return nil
    }

    /// A stop for work on `server` is about to be tried: a control connection that is idle and verified on
    /// *another* server may be one a restart left dead; the channel looks at it without waiting (which marks it
    /// broken if so) before ``tryStart(on:isBroken:now:)``.
    func controlToLookAt(before server: Server) -> Connection? {
        guard case .open(let control?, _) = state, !control.busy, control.server != server else { return nil }
        return control.connection
    }

    enum TryAction {
        /// Run the stop command on this connection, then report ``commandEnded(disable:)``.
        case start(Connection)
        /// Use the owner's fallback (Postgres: a cancel request). Close `dead` (dropped here) and start a reconnect
        /// if `reconnect`, then report ``reconnectEnded(_:now:)``.
        case cannot(dead: Connection?, reconnect: Bool)
    }

    /// A stop for work on `server`.
    mutating func tryStart(
        on server: Server, isBroken: (Connection) -> Bool, now: ContinuousClock.Instant
    ) -> TryAction {
        guard case .open(let control, var reconnect) = state else { return .cannot(dead: nil, reconnect: false) }
        if var control, !isBroken(control.connection) {
            guard !control.busy, control.server == server else { return .cannot(dead: nil, reconnect: false) }
            control.busy = true
            state = .open(control: control, reconnect: reconnect)
            return .start(control.connection)
        }
        // No live control connection: drop a dead one and reconnect if it is time.
        let startsReconnect = canReconnect && !reconnect.inFlight && now >= reconnect.notBefore
        if startsReconnect { reconnect.inFlight = true }
        state = .open(control: nil, reconnect: reconnect)
        return .cannot(dead: control?.connection, reconnect: startsReconnect)
    }

    /// The stop command ended. `disable`: the server refused it, and will refuse every other (no privilege).
    mutating func commandEnded(disable: Bool) {
        guard case .open(var control, let reconnect) = state else { return }
        if disable {
            state = .disabled(control: control?.connection)
            return
        }
        control?.busy = false
        state = .open(control: control, reconnect: reconnect)
    }

    /// Whether to open a control connection now (``ControlChannel/connectIfNeeded()``): none, or a broken
    /// one, no attempt under way, and the backoff passed. If so the attempt is marked under way: report
    /// ``reconnectEnded(_:now:)``.
    mutating func connectIfNeeded(isBroken: (Connection) -> Bool, now: ContinuousClock.Instant) -> Bool {
        guard canReconnect, case .open(let control, var reconnect) = state, !reconnect.inFlight else { return false }
        if let control, !isBroken(control.connection) { return false }
        guard now >= reconnect.notBefore else { return false }
        reconnect.inFlight = true
        state = .open(control: control, reconnect: reconnect)
        return true
    }

    /// A reconnect ended with `made` (`nil`: it failed) and the server it is verified on (`nil`: unverified, as
    /// behind a pooler, so of no use). Returns what to close: `made` when it is not kept, the connection it
    /// replaces when it is.
    mutating func reconnectEnded(
        _ made: (Connection, Server?)?, now: ContinuousClock.Instant
    ) -> [Connection] {
        guard case .open(let control, var reconnect) = state else { return made.map { [$0.0] } ?? [] }
        reconnect.inFlight = false
        guard let (connection, verifiedOn) = made, let server = verifiedOn else {
            reconnect.failed(now: now)
            state = .open(control: control, reconnect: reconnect)
            return made.map { [$0.0] } ?? []
        }
        reconnect.backoff = .milliseconds(100)
        state = .open(control: Control(connection: connection, server: server), reconnect: reconnect)
        return control.map { [$0.connection] } ?? []
    }

    /// The channel closes: returns the control connection to close (after the channel's own work ended).
    mutating func close() -> Connection? {
        defer { state = .closed }
        return control
    }
}

extension ControlChannelStateMachine: Sendable where Connection: Sendable, Server: Sendable {}
extension ControlChannelStateMachine.Control: Sendable where Connection: Sendable, Server: Sendable {}
extension ControlChannelStateMachine.State: Sendable where Connection: Sendable, Server: Sendable {}
