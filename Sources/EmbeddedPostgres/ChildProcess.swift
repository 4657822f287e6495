import ResourceKit
#if canImport(Glibc)
import Glibc
#endif

/// Runs a program to completion with `posix_spawn` and `waitpid` (blocking: call it on the blocking pool).
/// Output goes to a file, never a pipe: `pg_ctl start` forks the postmaster, which would inherit a pipe and
/// keep it open.
enum ChildProcess {
    struct Failure: Error {
        let status: Int32
    }

    /// Runs `arguments[0]` (an absolute path) and returns its exit status.
    static func run(_ arguments: [String], outputPath: String) throws -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, arguments[0], &actions, nil, argv, environ)
        guard spawned == 0 else { throw SpawnError(errno: spawned) }
        var status: Int32 = 0
        do {
            _ = try Syscall.value("waitpid") { waitpid(pid, &status, 0) }
        } catch {
            throw SpawnError(errno: error.errno)
        }
        // WIFEXITED / WEXITSTATUS, spelled out (the macros are not imported).
        if status & 0x7f == 0 { return (status >> 8) & 0xff }
        return 128 + (status & 0x7f)
    }

    struct SpawnError: Error {
        let errno: Int32
    }
}
