import ResourceKit
import ResourceKitIO
import ResourceKitProcesses

#if canImport(Glibc)
import Glibc
#endif

/// Ties a cluster's life to its owner process: a pipe whose write end only the owner holds, and a watcher process
/// (`/bin/sh`) that reads the other end. When the owner ends, however it ends (`kill -9`, a crash, the OOM
/// killer), the kernel closes the write end, the watcher reads end-of-file, stops the postmaster (`SIGQUIT`, then
/// `SIGKILL` after 5 s) and removes the cluster's directory.
///
/// Why not a parent-death signal: `pg_ctl start` daemonizes the postmaster, so its parent is not the owner, and
/// the signal is cleared when `runuser` switches to the `postgres` user. A pipe needs neither: the kernel closes
/// it when the last holder dies. See Docs/Architecture.md, "Nothing outlives its owner".
struct ClusterLifeline: Sendable {
    /// The owner's end: closing it (or dying) wakes the watcher.
    let writeEnd: Int32
    /// The watcher's pid (a child of the owner: reaped by ``release()``).
    let watcher: Int32

    /// What the watcher runs: `$1` is the cluster's directory.
    static let script = """
        while read -r _; do :; done
        pidfile="$1/data/postmaster.pid"
        if [ -f "$pidfile" ]; then
            pid=$(head -n 1 "$pidfile")
            case "$pid" in ''|*[!0-9]*) pid="" ;; esac
            if [ -n "$pid" ] && [ "$(cat /proc/$pid/comm 2>/dev/null)" = postgres ]; then
                kill -QUIT "$pid" 2>/dev/null
                i=0
                while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
                kill -KILL "$pid" 2>/dev/null
            fi
        fi
        rm -rf "$1"
        """

    /// Starts the watcher for the cluster in `directory`.
    static func start(directory: String) throws(SystemError) -> ClusterLifeline {
        let pipe = try Syscall.makePipe()
        defer { Syscall.close(pipe.read) }
        let watcher: Int32
        do {
            watcher = try Syscall.spawn(
                ["/bin/sh", "-c", script, "rk-cluster-watcher", directory],
                environment: ProcessOwner.current.environment(),
                standardInput: .descriptor(pipe.read), standardOutput: .nullDevice, standardError: .nullDevice)
        } catch {
            Syscall.close(pipe.write)
            throw error
        }
        return ClusterLifeline(writeEnd: pipe.write, watcher: watcher)
    }

    /// The owner is done with the cluster (stopped and removed it): the watcher wakes, finds nothing left, and
    /// exits; it is reaped here. Blocking for as long as the watcher takes (milliseconds).
    func release() {
        Syscall.close(writeEnd)
        _ = try? Syscall.waitForExit(watcher)
    }
}
