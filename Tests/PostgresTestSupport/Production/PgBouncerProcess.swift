import EmbeddedPostgres
import Foundation
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// A real PgBouncer (Debian's `pgbouncer`) in front of one server, in transaction pooling mode, on a free
/// loopback port, run as the `postgres` OS user (PgBouncer refuses root). Clients authenticate with trust;
/// PgBouncer logs in to the server with the server's password.
public final class PgBouncerProcess: Sendable {
    private let service: BackgroundService

    public var port: Int { service.port }

    /// A conninfo for the superuser through PgBouncer.
    public var conninfo: String { "host=127.0.0.1 port=\(port) user=postgres dbname=postgres connect_timeout=10" }

    /// Starts PgBouncer for the server at 127.0.0.1:`serverPort`, with at most `poolSize` server connections.
    public static func start(serverPort: Int, password: String?, poolSize: Int = 20) async throws -> PgBouncerProcess {
        guard FileManager.default.isExecutableFile(atPath: "/usr/sbin/pgbouncer") else {
            throw BackgroundProcess.Failure(
                description: "pgbouncer is not installed (apt-get install pgbouncer; Scripts/test does it)")
        }
        let directory = try makeDirectory("resourcekit-pgbouncer")
        let port = BackgroundProcess.freePort()
        let serverPassword = password.map { " password=\($0)" } ?? ""
        let ini = """
            [databases]
            postgres = host=127.0.0.1 port=\(serverPort) dbname=postgres user=postgres\(serverPassword)
            [pgbouncer]
            listen_addr = 127.0.0.1
            listen_port = \(port)
            unix_socket_dir =
            auth_type = trust
            auth_file = \(directory)/users.txt
            pool_mode = transaction
            max_client_conn = 500
            default_pool_size = \(poolSize)
            ignore_startup_parameters = extra_float_digits
            logfile = \(directory)/pgbouncer.log
            pidfile = \(directory)/pgbouncer.pid
            """
        try ini.write(toFile: directory + "/pgbouncer.ini", atomically: true, encoding: .utf8)
        try "\"postgres\" \"\"\n".write(toFile: directory + "/users.txt", atomically: true, encoding: .utf8)
        try ownByPostgres(directory, files: ["pgbouncer.ini", "users.txt"])
        return PgBouncerProcess(
            service: try await BackgroundService.start(
                asPostgresUser(["/usr/sbin/pgbouncer", directory + "/pgbouncer.ini"]),
                directory: directory, log: "stdout.log", port: port, stopSignal: SIGINT
            ))
    }

    private init(service: BackgroundService) {
        self.service = service
    }

    /// Stops it without waiting (for exit handlers).
    public func terminateNow() {
        service.terminateNow()
    }

    /// Stops PgBouncer and removes its directory.
    public func stop() async {
        await service.stop()
    }

    /// Runs `body` with a conninfo through a PgBouncer started in front of the server `conninfo` names (a
    /// key=value string over TCP, trust authentication), stopped afterwards however `body` ends.
    public static func inFront<T>(
        of conninfo: String, poolSize: Int = 20, _ body: (String) async throws -> T
    ) async throws -> T {
        guard let port = SlowCancelRelay.port(of: conninfo) else {
            throw BackgroundProcess.Failure(description: "not a TCP conninfo: \(conninfo)")
        }
        let bouncer = try await start(serverPort: port, password: nil, poolSize: poolSize)
        do {
            let value = try await body(bouncer.conninfo)
            await bouncer.stop()
            return value
        } catch {
            await bouncer.stop()
            throw error
        }
    }
}

/// A new temporary directory `/tmp/<prefix>-XXXXXX` that records this process as its owner (so that a later run
/// removes it if this one is killed), owned by the `postgres` OS user when running as root.
func makeDirectory(_ prefix: String) throws -> String {
    let directory: String
    do {
        directory = try Leftovers.makeDirectory(namePrefix: prefix + "-")
    } catch {
        throw BackgroundProcess.Failure(description: error.description)
    }
    try ownByPostgres(directory, files: [])
    return directory
}

/// Gives `directory` (and `files` in it) to the `postgres` OS user when running as root.
func ownByPostgres(_ directory: String, files: [String]) throws {
    guard getuid() == 0 else { return }
    guard let user = getpwnam("postgres") else {
        throw BackgroundProcess.Failure(description: "running as root, but there is no 'postgres' OS user")
    }
    for path in [directory] + files.map({ directory + "/" + $0 }) {
        chown(path, user.pointee.pw_uid, user.pointee.pw_gid)
    }
}

/// `arguments` run as the `postgres` OS user when running as root (`setpriv` execs: the pid is the program's).
func asPostgresUser(_ arguments: [String]) -> [String] {
    guard getuid() == 0 else { return arguments }
    return ["/usr/bin/setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"] + arguments
}
