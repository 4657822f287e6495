import Foundation
import ResourceKit

#if canImport(Glibc)
import Glibc
#endif

/// What throwaway servers and helpers leave on the machine, and the reaper that removes it once its owner is
/// gone, as a container reaper does: directories named `/tmp/resourcekit-*` that record their owner
/// (``ProcessOwner/fileName``) and processes that carry their owner in the environment
/// (``ProcessOwner/environmentKey``).
///
/// - At the first start of a fixture in a process, ``reapAbandoned()`` stops every marked process and removes
///   every marked directory whose owner has died (`kill -9`, a crash, the OOM killer).
/// - At a normal exit and on `SIGINT`, `SIGTERM` or `SIGHUP`, ``removeOwnAtExit()`` stops this process's own
///   marked processes and removes its own directories, whatever the fixtures managed to stop themselves.
///
/// See Docs/Architecture.md, "Nothing outlives its owner".
public enum Leftovers {
    /// Where the directories live, and how their names start.
    public static let directoryPrefix = "/tmp/resourcekit-"
    /// How long a directory without an owner file is left alone (it may be one being made right now).
    static let ownerlessGrace: TimeInterval = 60

    /// What a sweep stopped and removed.
    public struct Sweep: Sendable, Equatable {
        /// The processes that were signalled.
        public var processes: [Int32] = []
        /// The directories that were removed.
        public var directories: [String] = []
    }

    /// Makes a new directory `/tmp/<namePrefix>XXXXXX` owned by this process: it records the owner before it is
    /// returned. Only names that start with `resourcekit-` are reaped. Call ``reapAbandoned()`` once before a
    /// process's first.
    public static func makeDirectory(namePrefix: String) throws(Failure) -> String {
        do {
            return try FixtureAdmissions.process.admit { () throws(Failure) -> String in
                try makeOwnedDirectory(namePrefix: namePrefix)
            }
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure("\(error)")
        }
    }

    private static func makeOwnedDirectory(namePrefix: String) throws(Failure) -> String {
        var template = Array("/tmp/\(namePrefix)XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw Failure("could not create a directory under /tmp") }
        let directory = String(cString: made)
        let owner = ProcessOwner.current.description + "\n"
        let ownerFile = directory + "/" + ProcessOwner.fileName
        guard FileManager.default.createFile(atPath: ownerFile, contents: Data(owner.utf8)) else {
            rmdir(directory)
            throw Failure("could not record the owner of \(directory)")
        }
        return directory
    }

    /// Why a directory could not be made.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    private static let reapedOnce = Locked<Sweep?>(nil)

    /// Stops the processes and removes the directories whose owner has died, on a thread of its own. Runs once
    /// per process (later calls return the first sweep).
    ///
    /// Cancellation: the sweep runs to its end; a cancelled caller still waits for it (a few seconds at most,
    /// when a server must be stopped), so that the fixture it starts next never meets a half-removed leftover.
    @discardableResult
    public static func reapAbandoned() async -> Sweep {
        await onItsOwnThread { reapAbandonedBlocking() }
    }

    /// Runs a sweep on a thread of its own (it may wait seconds for processes to stop: never on the cooperative
    /// pool nor on a shared blocking pool) and waits for it, also when the caller is cancelled.
    package static func onItsOwnThread(_ sweep: @escaping @Sendable () -> Sweep) async -> Sweep {
        let done = OneShotEvent()
        let result = Locked(Sweep())
        DedicatedThread.start(name: "rk.reaper") {
            let swept = sweep()
            result.withLock { $0 = swept }
            done.set()
        }
        do {
            try await done.wait(shielded: true)
        } catch {
            // A shielded wait without a deadline does not throw; the sweep's result is read below either way.
        }
        return result.withLock { $0 }
    }

    /// The blocking form of ``reapAbandoned()``, for a thread that may block.
    @discardableResult
    public static func reapAbandonedBlocking() -> Sweep {
        reapedOnce.withLock { done in
            if let done { return done }
            let sweep = sweepAbandoned()
            done = sweep
            return sweep
        }
    }

    /// One sweep for what dead owners left, every time it is called (``reapAbandoned()`` sweeps once).
    /// A directory with no owner file (made before owners were recorded) counts as abandoned once it is older
    /// than the grace period.
    package static func sweepAbandoned() -> Sweep {
        sweep { owner in owner.map { !$0.isAlive } ?? true }
    }

    /// Stops this process's own marked processes and removes its own directories, and whatever owners that have
    /// died since the start left (a helper this process killed, whose own children outlived it). Blocking.
    @discardableResult
    public static func removeOwn() -> Sweep {
        let me = ProcessOwner.current
        return sweep { owner in owner.map { $0 == me || !$0.isAlive } }
    }

    /// Calls ``removeOwn()`` at a normal exit and on `SIGINT`, `SIGTERM` and `SIGHUP` (after the cleanups
    /// given to ``onTerminationSignal(_:)``; the signal then takes its default effect). Idempotent.
    public static func removeOwnAtExit() {
        let first = exitHandlerInstalled.withLock { installed -> Bool in
            defer { installed = true }
            return !installed
        }
        guard first else { return }
        atexit { Leftovers.removeOwn() }
        onTerminationSignal {}
    }

    private static let exitHandlerInstalled = Locked(false)

    /// Runs `cleanup` when the process receives `SIGINT`, `SIGTERM` or `SIGHUP`, then removes this process's
    /// leftovers (``removeOwn()``) and lets the signal take its default effect (the process ends with it). For
    /// processes with no shutdown path of their own, such as a test runner. Before any cleanup runs, no new fixture
    /// is admitted (``FixtureAdmissions``).
    ///
    /// The cleanups run on a dispatch queue, not in a signal handler, so they may block; they run in the order
    /// they were given.
    public static func onTerminationSignal(_ cleanup: @escaping @Sendable () -> Void) {
        let install = signalCleanups.withLock { cleanups -> Bool in
            cleanups.append(cleanup)
            return cleanups.count == 1
        }
        guard install else { return }
        for number in [SIGINT, SIGTERM, SIGHUP] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                // Nothing new from here on: what the cleanups and the sweep miss would outlive the process.
                FixtureAdmissions.process.close()
                for cleanup in Leftovers.signalCleanups.withLock({ $0 }) { cleanup() }
                Leftovers.removeOwn()
                signal(number, SIG_DFL)
                raise(number)
            }
            source.resume()
            signalSources.withLock { $0.append(SignalSourceBox(source)) }
        }
    }

    private static let signalCleanups = Locked<[@Sendable () -> Void]>([])
    private static let signalSources = Locked<[SignalSourceBox]>([])

    /// Scans the machine once: `isAbandoned(owner)` says whether what `owner` left goes (`nil` for a directory
    /// with no owner file: abandoned once older than the grace period; nil from the closure: keep).
    static func sweep(isAbandoned: (ProcessOwner?) -> Bool?) -> Sweep {
        var result = Sweep()
        let me = getpid()
        var doomed: [Int32] = []
        for pid in allProcesses() where pid != me {
            guard let owner = markedOwner(of: pid), isAbandoned(owner) == true else { continue }
            doomed.append(pid)
        }
        var directories: [String] = []
        let parent = (directoryPrefix as NSString).deletingLastPathComponent
        let namePrefix = (directoryPrefix as NSString).lastPathComponent
        let names = (try? FileManager.default.contentsOfDirectory(atPath: parent)) ?? []
        for name in names where name.hasPrefix(namePrefix) {
            let directory = parent + "/" + name
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue
            else { continue }
            let recorded = try? String(contentsOfFile: directory + "/" + ProcessOwner.fileName, encoding: .utf8)
            let verdict: Bool?
            if let recorded {
                verdict = ProcessOwner(parsing: recorded).flatMap { isAbandoned($0) } ?? isAbandoned(nil)
            } else {
                verdict = isOlderThanGrace(directory) ? isAbandoned(nil) : false
            }
            guard verdict == true else { continue }
            directories.append(directory)
            // A server started before owners were recorded carries no mark: its pid file names it.
            if let postmaster = postmaster(in: directory), !doomed.contains(postmaster) { doomed.append(postmaster) }
        }
        terminate(doomed)
        result.processes = doomed
        for directory in directories where (try? FileManager.default.removeItem(atPath: directory)) != nil {
            result.directories.append(directory)
        }
        return result
    }

    /// Signals `pids` (a server `SIGQUIT`, its immediate shutdown; anything else `SIGTERM`), waits up to 5 s
    /// for them to go, then kills what is left.
    static func terminate(_ pids: [Int32]) {
        guard !pids.isEmpty else { return }
        for pid in pids { kill(pid, command(of: pid) == "postgres" ? SIGQUIT : SIGTERM) }
        if waitUntilGone(pids, seconds: 5) { return }
        for pid in pids where isRunning(pid) { kill(pid, SIGKILL) }
        _ = waitUntilGone(pids, seconds: 2)
    }

    private static func waitUntilGone(_ pids: [Int32], seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            // A process of our own that has ended is reaped here (nobody may be waiting for it at exit); for any
            // other pid this fails with ECHILD and changes nothing.
            for pid in pids { waitpid(pid, nil, WNOHANG) }
            guard pids.contains(where: isRunning) else { break }
            if Date() > deadline { return false }
            usleep(10_000)  // other processes' exits offer no event to wait on here (they are not our children)
        }
        for pid in pids { waitpid(pid, nil, WNOHANG) }
        return true
    }

    private static func isRunning(_ pid: Int32) -> Bool {
        guard let stat = ProcessOwner.stat(of: pid) else { return false }
        return stat.state != "Z"
    }

    private static func allProcesses() -> [Int32] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { Int32($0) }
    }

    /// The owner named in `pid`'s environment, if any (`nil` also when the environment cannot be read).
    static func markedOwner(of pid: Int32) -> ProcessOwner? {
        guard let environ = FileManager.default.contents(atPath: "/proc/\(pid)/environ") else { return nil }
        let key = Array((ProcessOwner.environmentKey + "=").utf8)
        for entry in environ.split(separator: 0) where entry.starts(with: key) {
            return ProcessOwner(parsing: String(decoding: entry.dropFirst(key.count), as: UTF8.self))
        }
        return nil
    }

    private static func command(of pid: Int32) -> String {
        (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
    }

    /// The postmaster of a cluster under `directory`, if its pid file names a running `postgres` whose command
    /// line names the directory.
    private static func postmaster(in directory: String) -> Int32? {
        guard let text = try? String(contentsOfFile: directory + "/data/postmaster.pid", encoding: .utf8),
            let first = text.split(separator: "\n").first, let pid = Int32(first), pid > 1,
            command(of: pid) == "postgres",
            let cmdline = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline"),
            String(decoding: cmdline, as: UTF8.self).contains(directory)
        else { return nil }
        return pid
    }

    private static func isOlderThanGrace(_ path: String) -> Bool {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
            let modified = attributes[.modificationDate] as? Date
        else { return true }
        return Date().timeIntervalSince(modified) > ownerlessGrace
    }
}

/// Keeps a signal source alive for the life of the process.
///
/// `@unchecked Sendable`: libdispatch objects are thread-safe; the box is written once under a lock and never
/// read again, it only holds the reference.
private final class SignalSourceBox: @unchecked Sendable {
    let source: any DispatchSourceSignal
    init(_ source: any DispatchSourceSignal) { self.source = source }
}
