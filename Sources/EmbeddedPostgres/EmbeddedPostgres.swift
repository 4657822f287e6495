import Foundation
import ResourceKit
import ResourceKitIO

#if canImport(Glibc)
import Glibc
#endif

/// A throwaway PostgreSQL cluster for tests and demos: `initdb` into a temporary directory, `pg_ctl start` on a
/// free loopback port (as the `postgres` OS user when running as root, since `initdb` refuses root), and
/// `stop()` removes everything again.
///
/// The binaries are looked up on `PATH`, then under `/usr/lib/postgresql/*/bin` (newest first).
/// Blocking steps (`initdb`, `pg_ctl`, `openssl`) run on threads of their own (`clusterPool`), never on the
/// cooperative pool nor on the shared blocking pool.
///
/// The cluster never outlives its owner process: if the process ends without ``stop()`` (`kill -9`, a crash), a
/// watcher stops the server and removes its directory within a few seconds, and the next ``start(_:)`` in any
/// process reaps whatever a dead owner still left (``Leftovers``).
///
/// ``Options`` make production shapes: scram-sha-256 with a password (TCP and Unix socket alike) and TLS with
/// a self-signed certificate made by `openssl` at start.
public final class EmbeddedPostgres: Sendable {
    /// How the cluster is set up.
    public struct Options: Sendable, Hashable {
        /// The superuser's password; every connection then authenticates with scram-sha-256. `nil`: trust.
        public var password: String?
        /// `ssl=on` with a self-signed certificate (needs `openssl` on the machine).
        public var tls: Bool
        /// The start of the temporary directory's name under `/tmp` (a random suffix follows), so that the
        /// clusters of one tool can be told from another's. A name that starts with `resourcekit-` is reaped by
        /// ``Leftovers`` once its owner process is gone.
        public var directoryPrefix: String

        public init(password: String? = nil, tls: Bool = false, directoryPrefix: String = "resourcekit-pg-") {
            self.password = password
            self.tls = tls
            self.directoryPrefix = directoryPrefix
        }
    }

    /// Why a cluster could not be started.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    /// The loopback port the server listens on.
    public let port: Int
    /// The cluster's data directory (removed by ``stop()``).
    public let dataDirectory: String
    /// Where `initdb` and `pg_ctl` were found.
    public let binDirectory: String
    /// How it was set up.
    public let options: Options
    private let stopped = Locked(false)
    /// The watcher that stops the cluster if this process dies without doing so (``ClusterLifeline``).
    private let lifeline = Locked<ClusterLifeline?>(nil)

    /// The threads that run `initdb`, `pg_ctl` and `openssl` (seconds each): apart from the shared blocking
    /// pool, whose threads serve I/O that must not wait behind them.
    static let clusterPool = BlockingPool(threadCount: 4, queueLimit: 1_024, name: "rk.embedded-pg")

    /// A conninfo string for the superuser `postgres` over TCP (with the password, if the cluster has one;
    /// TLS is used when the cluster offers it, libpq's default `sslmode=prefer`).
    public var conninfo: String {
        "host=127.0.0.1 port=\(port) user=postgres dbname=postgres connect_timeout=10" + passwordParameter
    }
    /// A conninfo string for the superuser over the cluster's Unix socket.
    public var unixSocketConninfo: String {
        "host=\(dataDirectory) port=\(port) user=postgres dbname=postgres connect_timeout=10" + passwordParameter
    }
    /// The same as ``conninfo`` as a URL (without the password).
    public var url: String { "postgres://postgres@127.0.0.1:\(port)/postgres" }

    private var passwordParameter: String { options.password.map { " password='\($0)'" } ?? "" }

    private init(port: Int, dataDirectory: String, binDirectory: String, options: Options) {
        self.port = port
        self.dataDirectory = dataDirectory
        self.binDirectory = binDirectory
        self.options = options
    }

    /// The server's command-line settings, the same for every start.
    private var serverOptions: String {
        var text = "-p \(port) -c listen_addresses=127.0.0.1 -k \(dataDirectory) -c fsync=off -c max_connections=300"
        text += " -c synchronous_commit=off"
        if options.tls {
            text +=
                " -c ssl=on -c ssl_cert_file=\(dataDirectory)/server.crt -c ssl_key_file=\(dataDirectory)/server.key"
        }
        return text
    }

    /// Finds the server binaries, or explains what to install.
    public static func findBinaries() throws -> String {
        let fileManager = FileManager.default
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        for directory in path.split(separator: ":").map(String.init)
        where fileManager.isExecutableFile(atPath: directory + "/initdb")
            && fileManager.isExecutableFile(atPath: directory + "/pg_ctl")
        {
            return directory
        }
        let root = "/usr/lib/postgresql"
        let versions = ((try? fileManager.contentsOfDirectory(atPath: root)) ?? [])
            .compactMap { Int($0) }.sorted(by: >)
        for version in versions where fileManager.isExecutableFile(atPath: "\(root)/\(version)/bin/initdb") {
            return "\(root)/\(version)/bin"
        }
        throw Failure(
            description:
                """
                no PostgreSQL server binaries found (initdb, pg_ctl on PATH or in /usr/lib/postgresql/*/bin); \
                install the 'postgresql' package
                """
        )
    }

    /// Starts a new cluster.
    ///
    /// Cancellation: the steps run on the blocking pool; a cancelled caller resumes at once, and the cluster
    /// being set up is stopped and removed when its step finishes.
    public static func start(_ options: Options = Options()) async throws -> EmbeddedPostgres {
        let bin = try findBinaries()
        // Whoever comes second stops the cluster: the job when the caller already gave up, or the cancel
        // hook when the job had already produced a cluster that the caller will never receive.
        let handoff = Locked<(abandoned: Bool, produced: EmbeddedPostgres?)>((false, nil))
        return try await clusterPool.run(onCancel: { _ in
            let orphan = handoff.withLock { state -> EmbeddedPostgres? in
                state.abandoned = true
                defer { state.produced = nil }
                return state.produced
            }
            if let orphan, !clusterPool.submit({ orphan.stopBlocking() }) {
                DedicatedThread.start(name: "rk.pg-orphan") { orphan.stopBlocking() }
            }
        }) { () throws -> EmbeddedPostgres in
            let server = try startBlocking(bin: bin, options: options)
            let abandoned = handoff.withLock { state -> Bool in
                if !state.abandoned { state.produced = server }
                return state.abandoned
            }
            if abandoned {
                server.stopBlocking()
                throw CancellationError()
            }
            return server
        }
    }

    /// Starts a cluster, trying again (three attempts in all) when the server itself does not come up: the
    /// free port picked for it can be taken by another process between the pick and the server's bind.
    static func startBlocking(bin: String, options: Options) throws -> EmbeddedPostgres {
        Leftovers.reapAbandonedBlocking()
        var attempt = 1
        while true {
            do {
                return try startOnce(bin: bin, options: options)
            } catch let failed as ServerDidNotStart {
                guard attempt < 3 else { throw failed.failure }
                attempt += 1
            }
        }
    }

    /// `pg_ctl start` failed (the cluster was made): worth another try on another port.
    private struct ServerDidNotStart: Error {
        let failure: Failure
    }

    private static func startOnce(bin: String, options: Options) throws -> EmbeddedPostgres {
        let directory: String
        do {
            directory = try Leftovers.makeDirectory(namePrefix: options.directoryPrefix)
        } catch {
            throw Failure(description: error.description)
        }
        let asRoot = getuid() == 0
        if asRoot {
            guard let user = getpwnam("postgres") else {
                throw Failure(description: "running as root, but there is no 'postgres' OS user to run the server as")
            }
            chown(directory, user.pointee.pw_uid, user.pointee.pw_gid)
        }
        let data = directory + "/data"
        let port = try freePort()
        let server = EmbeddedPostgres(port: port, dataDirectory: directory, binDirectory: bin, options: options)
        do {
            let watcher: ClusterLifeline
            do {
                watcher = try ClusterLifeline.start(directory: directory)
            } catch {
                throw Failure(description: "could not start the cluster's watcher: \(error)")
            }
            server.lifeline.withLock { $0 = watcher }
            var initdb = ["-D", data, "-U", "postgres", "-E", "UTF8", "--no-sync"]
            if let password = options.password {
                let file = directory + "/pwfile"
                try writeOwned(file, password + "\n", asRoot: asRoot)
                initdb += ["-A", "scram-sha-256", "--pwfile", file]
            } else {
                initdb += ["-A", "trust"]
            }
            try run(bin + "/initdb", initdb, asRoot: asRoot, log: directory + "/initdb.log")
            if options.tls {
                try run(
                    "/usr/bin/openssl",
                    [
                        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost",
                        "-keyout", directory + "/server.key", "-out", directory + "/server.crt",
                    ], asRoot: asRoot, log: directory + "/openssl.log")
                chmod(directory + "/server.key", 0o600)
            }
            do {
                try run(
                    bin + "/pg_ctl",
                    [
                        "-D", data, "-l", directory + "/server.log", "-w", "-t", "60", "-o", server.serverOptions,
                        "start",
                    ],
                    asRoot: asRoot, log: directory + "/pg_ctl.log")
            } catch let failure as Failure {
                throw ServerDidNotStart(failure: failure)
            }
        } catch {
            server.stopBlocking()
            throw error
        }
        return server
    }

    /// Stops the server (`pg_ctl stop -m fast`) and removes the directory. Idempotent.
    public func stop() async {
        do {
            try await Self.clusterPool.run { self.stopBlocking() }
        } catch {
            stopBlocking()
        }
    }

    /// The blocking form of ``stop()``, for exit handlers.
    public func stopBlocking() {
        let first = stopped.withLock { stopped -> Bool in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        _ = try? Self.run(
            binDirectory + "/pg_ctl", ["-D", dataDirectory + "/data", "-m", "fast", "-w", "stop"],
            asRoot: getuid() == 0, log: nil)
        try? FileManager.default.removeItem(atPath: dataDirectory)
        lifeline.withLock { lifeline in
            defer { lifeline = nil }
            return lifeline
        }?.release()
    }

    /// Stops the server abruptly (`pg_ctl stop -m immediate`), keeping the data directory: for fault tests.
    package func killImmediately() async throws {
        try await Self.clusterPool.run { try self.killImmediatelyBlocking() }
    }

    /// The blocking form of ``killImmediately()``.
    package func killImmediatelyBlocking() throws {
        try Self.run(
            binDirectory + "/pg_ctl", ["-D", dataDirectory + "/data", "-m", "immediate", "-w", "stop"],
            asRoot: getuid() == 0, log: nil)
    }

    /// Restarts the server on the same port (`pg_ctl restart -m fast`: every session is terminated), or
    /// starts it again after ``killImmediately()``; waits on the cluster threads.
    package func restart() async throws {
        try await Self.clusterPool.run { try self.restartBlocking() }
    }

    /// The blocking form of ``restart()``.
    package func restartBlocking() throws {
        try Self.run(
            binDirectory + "/pg_ctl",
            [
                "-D", dataDirectory + "/data", "-l", dataDirectory + "/server.log", "-m", "fast", "-w", "-t", "60",
                "-o", serverOptions, "restart",
            ], asRoot: getuid() == 0, log: dataDirectory + "/pg_ctl-restart.log")
    }

    /// Writes `text` to a new file readable by the server's OS user only.
    private static func writeOwned(_ path: String, _ text: String, asRoot: Bool) throws {
        guard
            FileManager.default.createFile(
                atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
        else {
            throw Failure(description: "could not write a file in the cluster's directory")
        }
        if asRoot, let user = getpwnam("postgres") { chown(path, user.pointee.pw_uid, user.pointee.pw_gid) }
    }

    private static func run(_ executable: String, _ arguments: [String], asRoot: Bool, log: String?) throws {
        let command =
            asRoot ? ["/usr/sbin/runuser", "-u", "postgres", "--", executable] + arguments : [executable] + arguments
        let logPath = log ?? "/dev/null"
        // Checked, not held: the command runs to its end (seconds), and a sweep that begins meanwhile stops it.
        guard FixtureAdmissions.process.isOpen else {
            throw Failure(description: FixtureAdmissions.Closed().description)
        }
        let status: Int32
        do {
            status = try CommandRun.run(command, environment: ProcessOwner.current.environment(), outputPath: logPath)
        } catch {
            throw Failure(description: "could not start \((executable as NSString).lastPathComponent): \(error)")
        }
        guard status == 0 else {
            let text = log.flatMap { FileManager.default.contents(atPath: $0) } ?? Data()
            let tail = String(decoding: text.suffix(600), as: UTF8.self)
            throw Failure(
                description: "\((executable as NSString).lastPathComponent) failed (status \(status)): \(tail)")
        }
    }

    private static func freePort() throws -> Int {
        do {
            return try ServerPort.pickFree()
        } catch {
            throw Failure(description: error.description)
        }
    }
}
