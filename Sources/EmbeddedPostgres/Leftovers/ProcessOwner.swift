import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The process that owns something left on the machine (a fixture's directory, a server it started): its pid
/// and the kernel's start time of that pid, so that a recycled pid never passes for a dead owner.
///
/// Every process ResourceKit's fixtures start carries its owner in the environment variable
/// ``environmentKey`` (inherited by the process's own children: a postmaster's backends, a shell's commands), and
/// every directory they make records it in a file named ``fileName``. Whoever finds an owner that is no longer
/// alive may remove what it left (``Leftovers``). See Docs/Architecture.md, "Nothing outlives its owner".
public struct ProcessOwner: Sendable, Hashable, CustomStringConvertible {
    /// The owner's process id.
    public let pid: Int32
    /// The pid's start time, in clock ticks since boot (`/proc/<pid>/stat`, field 22).
    public let startTime: UInt64

    /// The environment variable that names a process's owner.
    public static let environmentKey = "RESOURCEKIT_OWNER"
    /// The file in an owned directory that names its owner.
    public static let fileName = ".owner"

    /// This process.
    public static let current: ProcessOwner = {
        let pid = getpid()
        return ProcessOwner(pid: pid, startTime: startTime(of: pid) ?? 0)
    }()

    /// The owner with this pid and start time.
    public init(pid: Int32, startTime: UInt64) {
        self.pid = pid
        self.startTime = startTime
    }

    /// Parses the form ``description`` writes (`"<pid>.<start time>"`); nil for anything else.
    public init?(parsing text: some StringProtocol) {
        let parts = text.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ".")
        guard parts.count == 2, let pid = Int32(parts[0]), pid > 0, let start = UInt64(parts[1]) else { return nil }
        self.init(pid: pid, startTime: start)
    }

    /// `"<pid>.<start time>"`.
    public var description: String { "\(pid).\(startTime)" }

    /// Whether the owner still runs: the pid exists, is not a zombie, and started when the owner did.
    public var isAlive: Bool {
        guard let stat = Self.stat(of: pid) else { return false }
        return stat.state != "Z" && stat.startTime == startTime
    }

    /// `environment` (the process's own when nil) with this owner added: the environment to spawn with.
    public func environment(_ environment: [String: String]? = nil) -> [String: String] {
        var environment = environment ?? ProcessInfo.processInfo.environment
        environment[Self.environmentKey] = description
        return environment
    }

    /// The start time of `pid`, or nil when there is no such process.
    static func startTime(of pid: Int32) -> UInt64? {
        stat(of: pid)?.startTime
    }

    /// The state letter and the start time from `/proc/<pid>/stat` (the fields after the command name, which
    /// may itself contain spaces and parentheses).
    static func stat(of pid: Int32) -> (state: Character, startTime: UInt64)? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // fields[0] is the state (field 3); field 22, the start time, is fields[19].
        guard fields.count > 19, let state = fields[0].first, let start = UInt64(fields[19]) else { return nil }
        return (state, start)
    }
}
