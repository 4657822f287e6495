import EmbeddedPostgres
import Foundation
import ResourceKit

/// What every fixture that starts a process or makes a directory calls first.
public enum TestFixtures {
    private static let claimed = Locked(false)

    /// Once per test process: this process's leftovers (processes it started, directories it made) are removed
    /// at exit and on `SIGINT`, `SIGTERM` and `SIGHUP`, and what dead test runs left (`kill -9`) is reaped on a
    /// thread of its own. Never blocks the caller.
    public static func claim() {
        let first = claimed.withLock { claimed -> Bool in
            defer { claimed = true }
            return !claimed
        }
        guard first else { return }
        Leftovers.removeOwnAtExit()
        Thread.detachNewThread { Leftovers.reapAbandonedBlocking() }
    }

    /// A new directory `/tmp/resourcekit-<name>-XXXXXX` that records this process as its owner: removed at this
    /// process's exit (or by the next run, if this one is killed) even when the test that made it does not.
    public static func directory(_ name: String) throws -> String {
        claim()
        return try Leftovers.makeDirectory(namePrefix: "resourcekit-\(name)-")
    }
}
