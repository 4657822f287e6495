public import ResourceKit
import ResourceKitIO

/// A Redis connection through hiredis, as a resource: a database client whose running command is stopped only by
/// another command, sent on a second connection (Docs/WritingAnAdapter.md, "Database servers").
///
/// Commands run one at a time. A cancelled command returns at once; its stop goes to the server on a control
/// connection (`CLIENT UNBLOCK` for a blocking command such as `BLPOP`, `SCRIPT KILL` for `EVAL`, `FUNCTION KILL`
/// for `FCALL`), again every 10 ms until the command's reply shows that it stopped; the reply is drained off this
/// connection meanwhile, and the next command waits until it was. Built on `ServerStop` and `ControlChannel`.
///
/// Cancellation: a command whose task, scope or deadline is cancelled (or whose connection is) throws the cancel's
/// error at once; the server stops its work within a round trip when it is a blocking command or a script. Other
/// commands cannot be stopped on the server: their reply is drained when it comes (within 2 s, else the
/// connection is broken and every later command throws `ResourceKitError.Code.connectionBroken`).
public final class RedisConnection: ManagedResource {
    public static let kind = ResourceKind(name: "example.redis", closeTimeout: .seconds(5))

    /// The server's id of this connection (`CLIENT ID`), which `CLIENT UNBLOCK` names.
    public let clientID: Int
    private let wire: RedisWire
    private let control: ControlChannel<RedisWire, SameServer>
    private let serverStop = ServerStop()
    private let registration = HandleSlot()

    private init(wire: RedisWire, clientID: Int, host: String, port: Int) {
        self.wire = wire
        self.clientID = clientID
        let reactor = wire.reactor
        control = ControlChannel(
            connect: { try await RedisWire.connect(host: host, port: port, reactor: reactor) },
            close: { $0.free() }, isBroken: \.isBroken)
    }

    /// Connects to the server at `host:port` and registers the connection in `scope`.
    ///
    /// Cancellation: if the task or `scope` is cancelled the connect stops at once, the socket is closed, and the
    /// call throws.
    public static func connect(host: String = "127.0.0.1", port: Int, in scope: ResourceScope) async throws
        -> RedisConnection
    {
        let wire = try await RedisWire.connect(host: host, port: port)
        let id: RedisReply
        do {
            id = try await wire.command(["CLIENT", "ID"])
        } catch {
            wire.free()
            throw error
        }
        guard case .integer(let clientID) = id else {
            wire.free()
            throw RedisError(.protocolError, "CLIENT ID did not answer an integer")
        }
        let connection = RedisConnection(wire: wire, clientID: clientID, host: host, port: port)
        try await connection.registration.register(connection, in: scope, kind: kind, label: "redis")
        return connection
    }

    // snippet: redis-command (quoted in Docs/WritingAnAdapter.md)
    /// Sends one command and returns its reply.
    ///
    /// Cancellation: a checkpoint first (nothing is sent in a cancelled task or on a cancelled connection); a cancel
    /// while it runs returns at once with the cancel's error, and sends the command's stop as described above.
    /// - Throws: `CancellationError`, `DeadlineExceededError`, ``RedisError`` (an error reply is
    ///   ``RedisError/Code/server``), `ResourceKitError` (`connectionBroken`).
    public func command(_ arguments: [String]) async throws -> RedisReply {
        let handle = registration.handle
        try handle?.checkCancellation()
        try Task.checkCancellation()
        let stop = Self.stopCommand(for: arguments, clientID: clientID)
        let reply = try await serverStop.run(
            boundTo: handle,
            stop: { [control] in
                guard let stop else { return }  // nothing to send: the drain waits for the reply
                _ = await control.run { try? await $0.command(stop, deadline: .now + .seconds(1)) }
            },
            drain: { [wire] deadline in
                do {
                    try await wire.drain(until: deadline)
                } catch {
                    wire.shutdown()  // the server's state is unknown: end the connection
                    throw error
                }
            }
        ) {
            try await wire.command(arguments, boundTo: handle)
        }
        if case .error(let message) = reply { throw RedisError(.server, message) }
        return reply
    }
    // end snippet

    /// The command that stops `arguments`' work on the server, sent on the control connection.
    static func stopCommand(for arguments: [String], clientID: Int) -> [String]? {
        switch arguments.first?.uppercased() {
        case "BLPOP", "BRPOP", "BLMOVE", "BRPOPLPUSH", "BLMPOP", "BZPOPMIN", "BZPOPMAX", "BZMPOP", "XREAD",
            "XREADGROUP", "WAIT":
            ["CLIENT", "UNBLOCK", String(clientID), "ERROR"]
        case "EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO": ["SCRIPT", "KILL"]
        case "FCALL", "FCALL_RO": ["FUNCTION", "KILL"]
        default: nil
        }
    }

    /// The descriptors this connection holds now: its socket, and the control connection's when one is open.
    public var ownedDescriptors: [Int32] { [wire.fd] + (control.current.map { [$0.fd] } ?? []) }

    /// `true` while a command, or the drain of a cancelled one, holds the connection.
    public var isBusy: Bool { serverStop.isBusy }

    /// Nothing beyond what its commands do: each is bound to the handle, so a cancel of the connection cancels
    /// them, and their cancel sends the stop.
    public func cancel() {}

    /// Ends the connection: the socket is shut down (a drain still reading ends at once), the stops still being
    /// sent end, then both connections are closed.
    public func close() async {
        wire.shutdown()
        await serverStop.close()
        await control.close()
        wire.free()
    }
}
