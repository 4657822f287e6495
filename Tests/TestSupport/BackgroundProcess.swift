import EmbeddedPostgres
import Foundation
import ResourceKit
import ResourceKitIO
import ResourceKitProcesses

#if canImport(Glibc)
import Glibc
#endif

/// A long-running helper process for the production-shape tests (PgBouncer, a TCP balancer, a server in its
/// own pid namespace): started with `posix_spawn` (signal mask and dispositions reset), output to a log file
/// (never a pipe a daemon could inherit), stopped with a signal and reaped with `waitpid`.
public final class BackgroundProcess: Sendable {
    /// Why a helper could not be started or did not come up.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        public init(description: String) { self.description = description }
    }

    public let pid: Int32

    /// The threads that wait for helper processes (`waitpid` blocks): apart from the shared blocking pool,
    /// whose threads serve the adapters under test (a cancel request must never queue behind an `initdb`).
    static let waiters = BlockingPool(threadCount: 4, queueLimit: 1_024, name: "rk.test-processes")
    /// Where its stdout and stderr go.
    public let logPath: String
    private let reaped = Locked(false)

    /// Starts `arguments[0]` (an absolute path).
    public init(_ arguments: [String], logPath: String) throws {
        TestFixtures.claim()
        let pid: Int32
        do {
            // Marked with this process as its owner: a later run stops it if this one dies without doing so.
            // Admitted: a termination's sweep sees it (FixtureAdmissions).
            pid = try FixtureAdmissions.process.admit {
                try Syscall.spawn(
                    arguments, environment: ProcessOwner.current.environment(), standardOutput: .file(logPath),
                    standardError: .standardOutput)
            }
        } catch {
            throw Failure(description: "could not start \(arguments[0]): \(error)")
        }
        self.pid = pid
        self.logPath = logPath
    }

    /// The process's log, for failure messages.
    public var log: String {
        (try? String(contentsOfFile: logPath, encoding: .utf8)).map { String($0.suffix(1500)) } ?? ""
    }

    /// `true` while the process has not exited (reaps it if it has).
    public var isRunning: Bool {
        if reaped.withLock({ $0 }) { return false }
        if Syscall.exitStatusIfExited(pid) != nil {
            reaped.withLock { $0 = true }
            return false
        }
        return true
    }

    /// Sends `signal` and waits (on the blocking pool) until the process exited. Idempotent.
    public func stop(signal: Int32 = 15) async {  // 15: SIGTERM
        let pid = pid
        let first = reaped.withLock { reaped -> Bool in
            defer { reaped = true }
            return !reaped
        }
        guard first else { return }
        kill(pid, signal)
        do {
            _ = try await Self.waiters.run { try Syscall.waitForExit(pid) }
        } catch {
            // Cancelled: the process was signalled; it is reaped as a zombie of the test process at exit.
        }
    }

    /// Sends `signal` without waiting (for exit handlers).
    public func signalNow(_ signal: Int32) {
        if !reaped.withLock({ $0 }) { kill(pid, signal) }
    }

    /// Waits until a TCP connection to 127.0.0.1:`port` succeeds (the helper is listening), up to `timeout`.
    public func waitUntilListening(on port: Int, timeout: Duration = .seconds(20)) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            guard isRunning else { throw Failure(description: "the helper exited: \(log)") }
            if Self.canConnect(port: port) { return }
            try await Task.sleep(for: .milliseconds(20))  // polling a port another process opens: no event exists
        }
        throw Failure(description: "the helper never listened on port \(port): \(log)")
    }

    static func canConnect(port: Int) -> Bool {
        ServerPort.isAcceptingConnections(port)
    }

    /// A port for a server to listen on, below the ephemeral range so that no client connection takes it
    /// meanwhile (`ServerPort`).
    public static func freePort() -> Int {
        (try? ServerPort.pickFree()) ?? LoopbackPort().port
    }
}

/// A helper process that listens on a loopback port, with the directory that holds its files: started and
/// awaited until it listens (stopped again if it never does), stopped with its own signal, directory removed.
public final class BackgroundService: Sendable {
    public let port: Int
    public let directory: String
    public let process: BackgroundProcess
    private let stopSignal: Int32

    /// Starts `arguments` (logging to `directory/<log>`) and waits until it listens on `port`.
    public static func start(_ arguments: [String], directory: String, log: String, port: Int, stopSignal: Int32)
        async throws -> BackgroundService
    {
        let process = try BackgroundProcess(arguments, logPath: directory + "/" + log)
        let service = BackgroundService(port: port, directory: directory, process: process, stopSignal: stopSignal)
        do {
            try await process.waitUntilListening(on: port)
        } catch {
            await service.stop()
            throw error
        }
        return service
    }

    private init(port: Int, directory: String, process: BackgroundProcess, stopSignal: Int32) {
        self.port = port
        self.directory = directory
        self.process = process
        self.stopSignal = stopSignal
    }

    /// Signals it without waiting (for exit handlers).
    public func terminateNow() {
        process.signalNow(stopSignal)
    }

    /// Stops it, waits for it, removes its directory.
    public func stop() async {
        await process.stop(signal: stopSignal)
        try? FileManager.default.removeItem(atPath: directory)
    }
}

extension BackgroundProcess {
    /// Runs a program to completion (waiting on the blocking pool) and returns its exit status.
    public static func runToCompletion(_ arguments: [String], logPath: String) async throws -> Int32 {
        let process = try BackgroundProcess(arguments, logPath: logPath)
        let pid = process.pid
        return try await waiters.run {
            try Syscall.waitForExit(pid)
        }
    }
}
