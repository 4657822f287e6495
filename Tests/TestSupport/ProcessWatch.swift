import Foundation
import Glibc
import ResourceKit
import ResourceKitIO
import ResourceKitProcesses
import ResourceKitTesting

/// Events about other processes and the files they leave, for the crash-only tests: a process's exit (a pidfd,
/// for any process, not only a child) and a directory's removal (an inotify watch).
public enum ProcessWatch {
    /// Whether `pid` exits within `bound` (true at once if it is already gone).
    public static func exits(_ pid: Int32, within bound: Duration) async throws -> Bool {
        let exit: Int32
        do {
            exit = try Syscall.processExitDescriptor(pid)
        } catch  where error.errno == ESRCH {
            return true
        }
        defer { Syscall.close(exit) }
        do {
            try await IOReactor.shared.wait(for: exit, .readable, deadline: .now + bound)
            return true
        } catch is DeadlineExceededError {
            return false
        }
    }

    /// Whether the directory at `path` is removed within `bound` (true at once if it is gone).
    public static func removed(_ path: String, within bound: Duration) async throws -> Bool {
        let deadline = ContinuousClock.now + bound
        let watch: GuardedDescriptor
        do {
            watch = GuardedDescriptor(try Syscall.watchFileChanges(path: path))
        } catch  where error.errno == ENOENT {
            return true
        }
        defer { watch.close() }
        while FileManager.default.fileExists(atPath: path) {
            do {
                try await watch.perform(.readable, boundTo: nil, deadline: deadline) { fd -> Bool? in
                    var events = [UInt8](repeating: 0, count: 4096)
                    return try Syscall.nonBlocking("read") {
                        events.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, 4096) }
                    }.map { _ in true }
                }
            } catch is DeadlineExceededError {
                return !FileManager.default.fileExists(atPath: path)
            }
        }
        return true
    }

    /// The cluster a `resource-demo pg` run starts on its own: waits (polling: the server's startup offers no
    /// event) until a `/tmp/resourcekit-pg-*` directory not in `before` has a running postmaster.
    public static func newDemoCluster(besides before: Set<String>, within bound: Duration = .seconds(60))
        async throws -> (postmaster: Int32, directory: String)
    {
        let start = ContinuousClock.now
        while ContinuousClock.now - start < bound {
            let now = Set(try demoClusterDirectories())
            if let new = now.subtracting(before).first,
                let pidFile = try? String(contentsOfFile: "/tmp/\(new)/data/postmaster.pid", encoding: .utf8),
                let pid = Int32(pidFile.split(separator: "\n").first ?? ""), pid > 0  // initdb writes a negative pid
            {
                return (pid, "/tmp/\(new)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw ConditionNeverHeld(description: "the demo's cluster never came up")
    }

    /// The names of the demo's cluster directories now.
    public static func demoClusterDirectories() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: "/tmp").filter { $0.hasPrefix("resourcekit-pg-") }
    }
}
