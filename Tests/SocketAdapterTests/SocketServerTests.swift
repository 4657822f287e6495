import Foundation
import Glibc
import ResourceKit
@_spi(Testing) import ResourceKitIO
@testable import SocketAdapter
import ResourceKitTesting
import TestSupport
import Testing

/// `SocketServer.serve` on real loopback sockets: a scope per connection, backpressure at the limit, a connection's
/// end that never touches the accept, and the peer-silence options on what it accepts. Running out of descriptors
/// is tested on the demo's server, in a process of its own (`ServeTests`).
@Suite struct SocketServerTests {
    /// Runs `serve` on a new listener in a task of its own (inside `scope`), and `body` with the port.
    static func serving(
        in scope: ResourceScope, configuration: SocketServer.Configuration = .init(),
        handler: @escaping @Sendable (SocketConnection, ResourceScope) async throws -> Void,
        _ body: (Int, Task<Void, any Error>) async throws -> Void
    ) async throws {
        let listener = try await SocketListener.bind(in: scope)
        let server = Task { try await SocketServer.serve(listener, configuration: configuration, handler: handler) }
        defer { server.cancel() }
        try await body(listener.port, server)
    }

    static func echo(_ connection: SocketConnection) async throws {
        while let line = try await connection.readLine() { try await connection.write(line + "\n") }
    }

    @Test func eachConnectionHasAScopeOfItsOwnAndCancellingTheServerEndsThemAll() async throws {
        let registry = ResourceRegistry()
        let scopes = Locked<[ObjectIdentifier: String]>([:])
        try await withResourceScope("test", deadline: .now + TimingBound.singleShot, registry: registry) { scope in
            try await Self.serving(in: scope) { connection, connectionScope in
                scopes.withLock { $0[ObjectIdentifier(connectionScope)] = connectionScope.path }
                #expect(connectionScope.resourceCount == 1, "the accepted connection belongs to its scope")
                try await Self.echo(connection)
            } _: { port, server in
                let first = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
                let second = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
                for client in [first, second] {
                    try await client.write("hello\n")
                    #expect(try await client.readLine() == "hello")
                }
                #expect(scopes.withLock { Array($0.values) } == ["test/connection", "test/connection"])
                server.cancel()
                await #expect(throws: CancellationError.self) { try await server.value }
                // Both connections were closed by their scopes: the clients read the end of stream.
                #expect(try await first.readLine() == nil)
                #expect(try await second.readLine() == nil)
            }
            // Left: the listener and the two clients.
            #expect(registry.liveCount == 3)
        }
        #expect(registry.liveCount == 0)
    }

    /// At the limit the server stops accepting: the next client's connection waits in the backlog and is served
    /// once a running one ends, never beside it.
    @Test func atTheLimitTheServerStopsAcceptingUntilAConnectionEnds() async throws {
        let running = Locked(0)
        let mostAtOnce = Locked(0)
        try await withResourceScope("test", deadline: .now + TimingBound.singleShot, registry: ResourceRegistry()) {
            scope in
            try await Self.serving(in: scope, configuration: .init(maxConnections: 1)) { connection, _ in
                let now = running.withLock { count in
                    count += 1
                    return count
                }
                mostAtOnce.withLock { $0 = max($0, now) }
                defer { running.withLock { $0 -= 1 } }
                try await Self.echo(connection)
            } _: { port, _ in
                let first = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
                try await first.write("one\n")
                #expect(try await first.readLine() == "one")
                let second = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
                try await second.write("two\n")
                // Without the limit the second would be answered at once; give it a generous while to show it is not.
                await #expect(throws: DeadlineExceededError.self) {
                    try await withResourceScope("no answer", deadline: .now + .milliseconds(300)) { _ in
                        _ = try await second.readLine()
                    }
                }
                try first.shutdownWrite()
                #expect(try await first.readLine() == nil)
                #expect(try await second.readLine() == "two", "served once the first ended")
            }
        }
        #expect(mostAtOnce.withLock { $0 } == 1)
    }

    /// A connection's deadline or cancel ends that connection and nothing else: the accept goes on.
    @Test func aConnectionsDeadlineOrCancelNeverTouchesTheAccept() async throws {
        try await withResourceScope("test", deadline: .now + TimingBound.singleShot, registry: ResourceRegistry()) {
            scope in
            try await Self.serving(in: scope) { connection, connectionScope in
                guard let line = try await connection.readLine() else { return }
                switch line {
                case "deadline":
                    try await withResourceScope("request", deadline: .now + .milliseconds(20)) { _ in
                        _ = try await connection.readLine()
                    }
                case "cancel":
                    connectionScope.cancel()
                    _ = try await connection.readLine()
                default:
                    try await connection.write(line + "\n")
                }
            } _: { port, server in
                for ending in ["deadline", "cancel"] {
                    let client = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
                    try await client.write(ending + "\n")
                    #expect(try await client.readLine() == nil, "\(ending): that connection was closed")
                }
                let next = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
                try await next.write("still here\n")
                #expect(try await next.readLine() == "still here")
                #expect(server.isCancelled == false)
            }
        }
    }

    /// Every accepted TCP connection notices a vanished peer within the bound: keepalive after a quarter of it, three
    /// probes that end within it, and `TCP_USER_TIMEOUT` at the bound.
    @Test func acceptedConnectionsCarryThePeerSilenceBound() async throws {
        let options = Locked<[Int32]>([])
        try await withResourceScope("test", deadline: .now + TimingBound.singleShot, registry: ResourceRegistry()) {
            scope in
            try await Self.serving(in: scope, configuration: .init(peerSilenceBound: .seconds(30))) { connection, _ in
                let read = try connection.descriptor.withDescriptor { fd in
                    [
                        (SOL_SOCKET, SO_KEEPALIVE), (Int32(IPPROTO_TCP), TCP_KEEPIDLE),
                        (Int32(IPPROTO_TCP), TCP_KEEPINTVL), (Int32(IPPROTO_TCP), TCP_KEEPCNT),
                        (Int32(IPPROTO_TCP), TCP_USER_TIMEOUT), (Int32(IPPROTO_TCP), TCP_NODELAY),
                    ].map { level, name in
                        var value: Int32 = -1
                        var length = socklen_t(MemoryLayout<Int32>.size)
                        _ = getsockopt(fd, level, name, &value, &length)
                        return value
                    }
                }
                options.withLock { $0 = read }
                try await connection.write("read\n")
            } _: { port, _ in
                let client = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
                #expect(try await client.readLine() == "read")
            }
        }
        #expect(options.withLock { $0 } == [1, 7, 7, 3, 30_000, 1])
    }

    /// A peer that vanished without a FIN or a reset (the packets to it dropped on loopback by an iptables rule that
    /// the test removes again): the server notices within the bound, and the request it left running is cancelled.
    @Test func aVanishedPeersRequestIsCancelledWithinTheBound() async throws {
        try await Self.removeStaleRules()
        let (blocked, cancelled) = (OneShotEvent(), OneShotEvent())
        try await withResourceScope("test", deadline: .now + .seconds(60), registry: ResourceRegistry()) { scope in
            try await Self.serving(in: scope, configuration: .init(peerSilenceBound: .seconds(4))) { connection, _ in
                _ = try await RequestSession.run(on: connection) {
                    try await $0.readLine()
                } handle: { _, _ in
                    blocked.set()
                    do {
                        try await OneShotEvent().wait()
                    } catch {
                        cancelled.set()
                        throw error
                    }
                    return true
                }
            } _: { port, _ in
                let client = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
                let clientPort = try #require(client.localAddress?.port)
                try await client.write("SLOW\n")
                try await blocked.wait()
                let rule = [
                    "OUTPUT", "-o", "lo", "-p", "tcp", "--dport", "\(clientPort)", "-m", "comment", "--comment",
                    "\(Self.ruleMark)\(getpid())", "-j", "DROP",
                ]
                try await Self.iptables(["-I"] + rule)
                let vanished = ContinuousClock.now
                do {
                    try await cancelled.wait()
                } catch {
                    _ = try? await Self.iptables(["-D"] + rule)
                    throw error
                }
                let took = ContinuousClock.now - vanished
                try await Self.iptables(["-D"] + rule)
                // The bound counts from the last traffic, a little before the rule: generous, for a loaded machine.
                #expect(took < .seconds(10), "noticed after \(took)")
            }
        }
    }

    static let ruleMark = "resourcekit-test-"

    /// Runs `iptables` with `arguments`; throws when it fails. Returns what it printed.
    @discardableResult
    static func iptables(_ arguments: [String]) async throws -> String {
        let log = NSTemporaryDirectory() + "resourcekit-iptables-\(UUID().uuidString).log"
        defer { try? FileManager.default.removeItem(atPath: log) }
        let status = try await BackgroundProcess.runToCompletion(["/usr/sbin/iptables"] + arguments, logPath: log)
        let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        guard status == 0 else {
            throw BackgroundProcess.Failure(description: "iptables \(arguments) exited \(status): \(output)")
        }
        return output
    }

    /// Removes the rules a test process left when it died before removing them (its pid is in the mark).
    static func removeStaleRules() async throws {
        for line in try await iptables(["-S", "OUTPUT"]).split(separator: "\n") where line.contains(ruleMark) {
            let words = line.split(separator: " ").map(String.init)
            guard let mark = words.first(where: { $0.hasPrefix(ruleMark) }),
                let owner = Int32(mark.dropFirst(ruleMark.count)), kill(owner, 0) != 0
            else { continue }
            try await iptables(["-D"] + words.dropFirst(1))
        }
    }
}
