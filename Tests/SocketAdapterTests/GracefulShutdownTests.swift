import Glibc
import ResourceKit
import ResourceKitIO
import SocketAdapter
import ResourceKitTesting
import TestSupport
import Testing

/// A server under `GracefulShutdown`, on real loopback sockets: once it begins new connections are refused and idle
/// ones closed, running requests are answered within the grace, and one still running after it is cancelled and may
/// answer; `serve` then returns on its own.
@Suite struct GracefulShutdownTests {
    /// `WORK` blocks until `release` is set, then answers `done`; when its scope is cancelled after the grace it
    /// answers `ERR shutting down`. Anything else is echoed.
    static func serving(
        grace: Duration, release: OneShotEvent, working: OneShotEvent,
        _ body: (Int, ResourceScope, GracefulShutdown, Task<Void, any Error>) async throws -> Void
    ) async throws {
        let shutdown = GracefulShutdown(grace: grace)
        try await withResourceScope("test", deadline: .now + TimingBound.singleShot, registry: ResourceRegistry()) {
            scope in
            let listener = try await SocketListener.bind(in: scope)
            let server = Task {
                try await SocketServer.serve(listener, configuration: .init(shutdown: shutdown)) { connection, _ in
                    _ = try await RequestSession.run(on: connection) {
                        try await $0.readLine()
                    } handle: { line, _ in
                        guard line == "WORK" else {
                            try await connection.write(line + "\n")
                            return true
                        }
                        working.set()
                        do {
                            try await release.wait()
                        } catch is CancellationError where GracefulShutdown.current?.graceHasExpired == true {
                            try await connection.write("ERR shutting down\n")
                            return false
                        }
                        try await connection.write("done\n")
                        return true
                    }
                }
            }
            defer { server.cancel() }
            try await body(listener.port, scope, shutdown, server)
        }
    }

    /// A client whose `WORK` request runs now.
    static func working(port: Int, in scope: ResourceScope, until working: OneShotEvent) async throws
        -> SocketConnection
    {
        let busy = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
        try await busy.write("WORK\n")
        try await working.wait()
        return busy
    }

    @Test func idleConnectionsCloseNewOnesAreRefusedAndRunningRequestsAreAnswered() async throws {
        let (release, working) = (OneShotEvent(), OneShotEvent())
        try await Self.serving(grace: .seconds(60), release: release, working: working) {
            port, scope, shutdown, server in
            let idle = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
            try await idle.write("PING\n")
            #expect(try await idle.readLine() == "PING")
            let busy = try await Self.working(port: port, in: scope, until: working)

            shutdown.begin()
            await #expect(throws: SocketError.self, "refused once the shutdown began") {
                try await withResourceScope("late") { late in
                    _ = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: late)
                }
            }
            #expect(try await idle.readLine() == nil, "the idle connection was closed at once")
            release.set()
            #expect(try await busy.readLine() == "done", "the running request was answered")
            #expect(try await busy.readLine() == nil)
            try await server.value  // returns on its own, without a cancel
        }
    }

    @Test func aRequestStillRunningWhenTheGraceEndsIsCancelledAndMayStillAnswer() async throws {
        let (release, working) = (OneShotEvent(), OneShotEvent())
        try await Self.serving(grace: .milliseconds(100), release: release, working: working) {
            port, scope, shutdown, server in
            let busy = try await Self.working(port: port, in: scope, until: working)
            let began = ContinuousClock.now
            shutdown.begin()
            #expect(try await busy.readLine() == "ERR shutting down")
            #expect(ContinuousClock.now - began >= .milliseconds(100), "not before the grace ended")
            #expect(try await busy.readLine() == nil)
            try await server.value
        }
    }

    /// Opt-in signal handling: the first signal begins the shutdown, the second ends its grace at once.
    @Test func theFirstSignalBeginsTheShutdownAndTheSecondEndsItsGrace() async throws {
        let shutdown = GracefulShutdown(grace: .seconds(60))
        let handler = try shutdown.handleSignals([SIGUSR2])
        defer { withExtendedLifetime(handler) {} }
        try await withResourceScope("test", deadline: .now + TimingBound.singleShot, registry: ResourceRegistry()) {
            _ in
            kill(getpid(), SIGUSR2)
            try await shutdown.waitUntilBegun()
            #expect(!shutdown.graceHasExpired)
            kill(getpid(), SIGUSR2)
            try await shutdown.waitUntilGraceExpires()
            #expect(shutdown.graceHasExpired)
        }
    }
}
