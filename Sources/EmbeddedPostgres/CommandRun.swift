import ResourceKit
import ResourceKitIO
import ResourceKitProcesses

#if canImport(Glibc)
import Glibc
#endif

/// Runs a program to completion with `posix_spawn` and `waitpid` (blocking: call it on the blocking pool).
/// Output goes to a file, never a pipe: `pg_ctl start` forks the postmaster, which would inherit a pipe and
/// keep it open.
enum CommandRun {
    /// Runs `arguments[0]` (an absolute path) with `environment` and returns its exit status.
    static func run(_ arguments: [String], environment: [String: String], outputPath: String) throws -> Int32 {
        do {
            let pid = try Syscall.spawn(
                arguments, environment: environment, standardOutput: .file(outputPath), standardError: .standardOutput)
            return try Syscall.waitForExit(pid)
        } catch {
            throw SpawnError(errno: error.errno)
        }
    }

    struct SpawnError: Error {
        let errno: Int32
    }
}
