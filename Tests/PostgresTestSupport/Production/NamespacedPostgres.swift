import EmbeddedPostgres
import Foundation
import PostgresAdapter
import ResourceKit
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// A PostgreSQL server whose postmaster is pid 1 of its own pid namespace (`unshare --pid --fork`), as in a
/// container. Two of them hand out the *same* backend pids, which is what makes a pid alone ambiguous behind a
/// balancer. Trust authentication, autovacuum off (so no worker takes a pid at random).
public final class NamespacedPostgres: Sendable {
    private let service: BackgroundService

    public var port: Int { service.port }

    /// A conninfo straight to this server.
    public var conninfo: String { "host=127.0.0.1 port=\(port) user=postgres dbname=postgres connect_timeout=10" }

    public static func start() async throws -> NamespacedPostgres {
        let bin = try EmbeddedPostgres.findBinaries()
        let directory = try makeDirectory("resourcekit-pgns")
        let data = directory + "/data"
        let status = try await BackgroundProcess.runToCompletion(
            asPostgresUser([bin + "/initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"]),
            logPath: directory + "/initdb.log"
        )
        guard status == 0 else {
            throw BackgroundProcess.Failure(
                description:
                    "initdb failed: \((try? String(contentsOfFile: directory + "/initdb.log", encoding: .utf8)) ?? "")")
        }
        let port = BackgroundProcess.freePort()
        let service = try await BackgroundService.start(
            ["/usr/bin/unshare", "--pid", "--fork", "--kill-child=SIGQUIT"]
                + asPostgresUser([
                    bin + "/postgres", "-D", data, "-p", String(port), "-k", directory, "-c",
                    "listen_addresses=127.0.0.1",
                    "-c", "autovacuum=off", "-c", "fsync=off", "-c", "max_connections=100",
                ]),
            directory: directory, log: "server.log", port: port, stopSignal: SIGTERM
        )
        let server = NamespacedPostgres(service: service)
        do {
            try await server.waitUntilAcceptingQueries()
        } catch {
            await server.stop()
            throw error
        }
        return server
    }

    private init(service: BackgroundService) {
        self.service = service
    }

    /// The postmaster listens before it accepts sessions (startup): wait for a real query.
    private func waitUntilAcceptingQueries() async throws {
        let deadline = ContinuousClock.now + .seconds(20)
        while true {
            do {
                try await withResourceScope("namespaced.ready", registry: ResourceRegistry()) { scope in
                    _ = try await PostgresConnection.connect(conninfo, in: scope).query("SELECT 1")
                }
                return
            } catch let error as PostgresError where error.code == .connection && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))  // the server's startup has no event to await
            }
        }
    }

    /// The postmaster's pid as seen from outside its namespace.
    private var postmasterPID: Int32? {
        let pid = service.process.pid
        let children = (try? String(contentsOfFile: "/proc/\(pid)/task/\(pid)/children", encoding: .utf8)) ?? ""
        return children.split(separator: " ").first.flatMap { Int32($0) }
    }

    /// Immediate shutdown without waiting (for exit handlers).
    public func terminateNow() {
        if let postmaster = postmasterPID { kill(postmaster, SIGQUIT) }
    }

    /// Fast shutdown of the postmaster (pid 1 in its namespace: its real pid is the `unshare` process's
    /// child), then the directory is removed.
    public func stop() async {
        if let postmaster = postmasterPID { kill(postmaster, SIGINT) }
        await service.stop()
    }
}
