import Foundation
import ResourceKit
#if canImport(Glibc)
import Glibc
#endif

/// A throwaway PostgreSQL cluster for tests and demos: `initdb` into a temporary directory, `pg_ctl start` on a
/// free loopback port (as the `postgres` OS user when running as root, since `initdb` refuses root), and
/// `stop()` removes everything again.
///
/// The binaries are looked up on `PATH`, then under `/usr/lib/postgresql/*/bin` (newest first).
/// Blocking steps (`initdb`, `pg_ctl`) run on the blocking pool.
public final class EmbeddedPostgres: Sendable {
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
    private let stopped = Locked(false)

    /// A conninfo string for the superuser `postgres` (trust authentication).
    public var conninfo: String { "host=127.0.0.1 port=\(port) user=postgres dbname=postgres connect_timeout=10" }
    /// The same as a URL.
    public var url: String { "postgres://postgres@127.0.0.1:\(port)/postgres" }

    private init(port: Int, dataDirectory: String, binDirectory: String) {
        self.port = port
        self.dataDirectory = dataDirectory
        self.binDirectory = binDirectory
    }

    /// Finds the server binaries, or explains what to install.
    public static func findBinaries() throws -> String {
        let fileManager = FileManager.default
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        for directory in path.split(separator: ":").map(String.init)
        where fileManager.isExecutableFile(atPath: directory + "/initdb") && fileManager.isExecutableFile(atPath: directory + "/pg_ctl") {
            return directory
        }
        let root = "/usr/lib/postgresql"
        let versions = ((try? fileManager.contentsOfDirectory(atPath: root)) ?? [])
            .compactMap { Int($0) }.sorted(by: >)
        for version in versions where fileManager.isExecutableFile(atPath: "\(root)/\(version)/bin/initdb") {
            return "\(root)/\(version)/bin"
        }
        throw Failure(description: "no PostgreSQL server binaries found (initdb, pg_ctl on PATH or in /usr/lib/postgresql/*/bin); install the 'postgresql' package")
    }

    /// Starts a new cluster.
    ///
    /// Cancellation: the steps run on the blocking pool; a cancelled caller resumes at once, and the cluster
    /// being set up is stopped and removed when its step finishes.
    public static func start() async throws -> EmbeddedPostgres {
        let bin = try findBinaries()
        // Whoever comes second stops the cluster: the job when the caller already gave up, or the cancel
        // hook when the job had already produced a cluster that the caller will never receive.
        let handoff = Locked<(abandoned: Bool, produced: EmbeddedPostgres?)>((false, nil))
        return try await BlockingPool.shared.run(onCancel: { _ in
            let orphan = handoff.withLock { state -> EmbeddedPostgres? in
                state.abandoned = true
                defer { state.produced = nil }
                return state.produced
            }
            if let orphan, !BlockingPool.shared.submit({ orphan.stopBlocking() }) {
                Thread.detachNewThread { orphan.stopBlocking() }
            }
        }) { () throws -> EmbeddedPostgres in
            let server = try startBlocking(bin: bin)
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

    static func startBlocking(bin: String) throws -> EmbeddedPostgres {
        var template = Array("/tmp/resourcekit-pg-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw Failure(description: "could not create a temporary directory") }
        let directory = String(cString: made)
        let asRoot = getuid() == 0
        if asRoot {
            guard let user = getpwnam("postgres") else {
                throw Failure(description: "running as root, but there is no 'postgres' OS user to run the server as")
            }
            chown(directory, user.pointee.pw_uid, user.pointee.pw_gid)
        }
        let data = directory + "/data"
        let port = try freePort()
        let server = EmbeddedPostgres(port: port, dataDirectory: directory, binDirectory: bin)
        do {
            try run(bin + "/initdb", ["-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"], asRoot: asRoot, log: directory + "/initdb.log")
            let options = "-p \(port) -c listen_addresses=127.0.0.1 -k \(directory) -c fsync=off -c max_connections=300 -c synchronous_commit=off"
            try run(bin + "/pg_ctl", ["-D", data, "-l", directory + "/server.log", "-w", "-t", "60", "-o", options, "start"], asRoot: asRoot, log: directory + "/pg_ctl.log")
        } catch {
            server.stopBlocking()
            throw error
        }
        return server
    }

    /// Stops the server (`pg_ctl stop -m fast`) and removes the directory. Idempotent.
    public func stop() async {
        do {
            try await BlockingPool.shared.run { self.stopBlocking() }
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
        _ = try? Self.run(binDirectory + "/pg_ctl", ["-D", dataDirectory + "/data", "-m", "fast", "-w", "stop"], asRoot: getuid() == 0, log: nil)
        try? FileManager.default.removeItem(atPath: dataDirectory)
    }

    /// Stops the server abruptly (`pg_ctl stop -m immediate`), keeping the data directory: for fault tests.
    public func killImmediately() throws {
        try Self.run(binDirectory + "/pg_ctl", ["-D", dataDirectory + "/data", "-m", "immediate", "-w", "stop"], asRoot: getuid() == 0, log: nil)
    }

    /// Starts a server stopped by ``killImmediately()`` again, on the same port.
    public func restart() throws {
        let options = "-p \(port) -c listen_addresses=127.0.0.1 -k \(dataDirectory) -c fsync=off -c max_connections=300"
        try Self.run(binDirectory + "/pg_ctl", ["-D", dataDirectory + "/data", "-l", dataDirectory + "/server.log", "-w", "-t", "60", "-o", options, "start"], asRoot: getuid() == 0, log: dataDirectory + "/pg_ctl-restart.log")
    }

    private static func run(_ executable: String, _ arguments: [String], asRoot: Bool, log: String?) throws {
        let command = asRoot ? ["/usr/sbin/runuser", "-u", "postgres", "--", executable] + arguments : [executable] + arguments
        let logPath = log ?? "/dev/null"
        let status: Int32
        do {
            status = try ChildProcess.run(command, outputPath: logPath)
        } catch {
            throw Failure(description: "could not start \((executable as NSString).lastPathComponent): \(error)")
        }
        guard status == 0 else {
            let text = log.flatMap { FileManager.default.contents(atPath: $0) } ?? Data()
            let tail = String(decoding: text.suffix(600), as: UTF8.self)
            throw Failure(description: "\((executable as NSString).lastPathComponent) failed (status \(status)): \(tail)")
        }
    }

    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { Syscall.close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        guard bound == 0 else { throw Failure(description: "could not find a free port") }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
