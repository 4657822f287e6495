import Glibc
@testable import RedisAdapter
import ResourceKit
import ResourceKitIO

/// `RedisConnection` with one of the bugs an author of a database adapter writes, each in the part that handles
/// cancellation (the wire, `RedisWire`, is the example's). The kit must catch each one with no probe of the
/// author's: it sees only the connection's replies, its timing and its descriptors.
final class SeededRedisConnection: ManagedResource {
    enum Bug: String, CaseIterable, Sendable {
        /// A cancel only returns: no stop goes to the server, so the `BLPOP` stays blocked there, and the drain
        /// waits for a reply that never comes.
        case flagOnly
        /// The stop is sent 200 ms after the cancel, from a task of its own.
        case lateStop
        /// The command waits for its reply with a blocking `poll(2)` on the calling task's thread.
        case blockingCallOnCooperativePool
        /// The stop is sent, but the cancelled command's reply is left on the connection for the next one.
        case noDrain
        /// Every stop opens a kill connection of its own and never closes it.
        case killConnectionLeaked
    }

    static let kind = ResourceKind(name: "test.seeded-redis", closeTimeout: .seconds(5))
    let bug: Bug
    let clientID: Int
    private let wire: RedisWire
    private let host: String
    private let port: Int
    private let control: ControlChannel<RedisWire, SameServer>
    private let serverStop = ServerStop()
    private let registration = HandleSlot()
    /// `killConnectionLeaked`'s kill connections: the last one is reported as owned, none is ever closed.
    private let leaked = Locked<[Int32]>([])

    private init(bug: Bug, wire: RedisWire, clientID: Int, host: String, port: Int) {
        self.bug = bug
        self.wire = wire
        self.clientID = clientID
        self.host = host
        self.port = port
        let reactor = wire.reactor
        control = ControlChannel(
            connect: { try await RedisWire.connect(host: host, port: port, reactor: reactor) },
            close: { $0.free() }, isBroken: \.isBroken)
    }

    static func connect(port: Int, bug: Bug, in scope: ResourceScope) async throws -> SeededRedisConnection {
        let wire = try await RedisWire.connect(host: "127.0.0.1", port: port)
        guard case .integer(let id)? = try? await wire.command(["CLIENT", "ID"]) else {
            wire.free()
            throw RedisError(.protocolError, "CLIENT ID failed")
        }
        let connection = SeededRedisConnection(bug: bug, wire: wire, clientID: id, host: "127.0.0.1", port: port)
        try await connection.registration.register(connection, in: scope, kind: kind, label: "seeded redis")
        return connection
    }

    var ownedDescriptors: [Int32] {
        [wire.fd] + (control.current.map { [$0.fd] } ?? []) + (leaked.withLock { $0.last.map { [$0] } } ?? [])
    }

    func command(_ arguments: [String]) async throws -> RedisReply {
        let handle = registration.handle
        try handle?.checkCancellation()
        try Task.checkCancellation()
        let stop = RedisConnection.stopCommand(for: arguments, clientID: clientID)
        let reply = try await serverStop.run(
            boundTo: handle,
            stop: { [self] in
                guard let stop else { return }
                switch bug {
                case .flagOnly: return
                case .lateStop: try? await Task.sleep(for: .milliseconds(200))
                case .killConnectionLeaked:
                    guard let kill = try? await RedisWire.connect(host: host, port: port) else { return }
                    leaked.withLock { $0.append(kill.fd) }
                    _ = try? await kill.command(stop, deadline: .now + .seconds(1))
                    return
                default: break
                }
                _ = await control.run { try? await $0.command(stop, deadline: .now + .seconds(1)) }
            },
            drain: { [bug, wire] deadline in
                if bug == .noDrain { return }
                do {
                    try await wire.drain(until: deadline)
                } catch {
                    wire.shutdown()
                    throw error
                }
            }
        ) {
            if bug == .blockingCallOnCooperativePool {
                try wire.append(arguments)
                try await wire.flush(boundTo: handle, deadline: nil)
                var poller = pollfd(fd: wire.fd, events: Int16(POLLIN), revents: 0)
                _ = poll(&poller, 1, -1)  // the bug: a cooperative-pool thread blocked until the reply
                return try await wire.readReply(boundTo: handle, deadline: nil)
            }
            return try await wire.command(arguments, boundTo: handle)
        }
        if case .error(let message) = reply { throw RedisError(.server, message) }
        return reply
    }

    /// The blocking variant's threads are woken by a shut-down socket (the only way left to reach them).
    func cancel() {
        if bug == .blockingCallOnCooperativePool { wire.shutdown() }
    }

    func close() async {
        wire.shutdown()
        await serverStop.close()
        await control.close()
        wire.free()
    }
}
