import ResourceKitTesting
import EmbeddedPostgres
import Foundation
import Glibc
import ResourceKit
import ResourceKitIO
import ResourceKitProcesses

/// The built `resource-demo` binary running as a child process, its stdout and stderr captured in files.
/// (The test target must depend on `resource-demo` so that `swift test` builds it beside the test bundle.)
public final class DemoProcess: Sendable {
    public struct SpawnFailed: Error, CustomStringConvertible { public let description: String }

    public let pid: Int32
    private let directory: String
    private let exited = OneShotEvent()
    private let status = Locked<Int32?>(nil)

    /// The binary beside the test bundle (`swift test` builds it: the test target depends on it).
    public static let binary: String = {
        let testRunner = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        return testRunner.deletingLastPathComponent().appendingPathComponent("resource-demo").path
    }()

    /// The binary `name` beside the test bundle (an executable target the test target depends on).
    public static func helper(_ name: String) -> String {
        URL(fileURLWithPath: binary).deletingLastPathComponent().appendingPathComponent(name).path
    }

    /// Starts the built `resource-demo` (or `executable`, another binary beside the test bundle) with `arguments`.
    public init(_ arguments: [String], environment: [String: String] = [:], executable: String = binary) throws {
        TestFixtures.claim()
        do {
            directory = try Leftovers.makeDirectory(namePrefix: "resourcekit-demo-test-")
        } catch {
            throw SpawnFailed(description: error.description)
        }
        // Marked with this process as its owner: a later run stops it if this one dies without doing so.
        var merged = ProcessOwner.current.environment()
        merged["DATABASE_URL"] = nil
        for (key, value) in environment { merged[key] = value }
        let child: Int32
        do {
            let output = directory
            child = try FixtureAdmissions.process.admit {
                try Syscall.spawn(
                    [executable] + arguments, environment: merged,
                    standardOutput: .file(output + "/stdout", truncate: true),
                    standardError: .file(output + "/stderr", truncate: true)
                )
            }
        } catch {
            throw SpawnFailed(description: "spawn \(executable): \(error)")
        }
        pid = child
        let (exited, status, spawned) = (self.exited, self.status, child)
        Thread.detachNewThread {
            let code = (try? Syscall.waitForExit(spawned)) ?? -1
            status.withLock { $0 = code }
            exited.set()
        }
    }

    deinit {
        if !exited.isSet { kill(pid, SIGKILL) }
        try? FileManager.default.removeItem(atPath: directory)
    }

    public var standardOutput: String { (try? String(contentsOfFile: directory + "/stdout", encoding: .utf8)) ?? "" }
    public var standardError: String { (try? String(contentsOfFile: directory + "/stderr", encoding: .utf8)) ?? "" }

    /// The JSON objects printed on stdout.
    public var jsonLines: [[String: Any]] {
        standardOutput.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    public func signal(_ number: Int32) { kill(pid, number) }

    /// Waits for the exit and returns the status (128 + signal when killed by one); kills the process and
    /// fails after `timeout`.
    @discardableResult
    public func exitStatus(timeout: Duration = .seconds(60)) async throws -> Int32 {
        do {
            try await exited.wait(deadline: .now + timeout)
        } catch {
            kill(pid, SIGKILL)
            throw ConditionNeverHeld(
                description: "resource-demo did not exit within \(timeout); stderr: \(standardError)")
        }
        return status.withLock { $0 } ?? -1
    }

    /// Waits until stdout has a line containing `text`; returns that line. Event-driven: an inotify watch on
    /// the output file wakes it on every write (and on the process's exit, which closes the file).
    public func line(containing text: String, timeout: Duration = .seconds(60)) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        let watch = GuardedDescriptor(try Syscall.watchFileChanges(path: directory + "/stdout"))
        defer { watch.close() }
        while true {
            if let line = standardOutput.split(separator: "\n").first(where: { $0.contains(text) }) {
                return String(line)
            }
            if exited.isSet || ContinuousClock.now > deadline {
                throw ConditionNeverHeld(
                    description: "no line containing '\(text)'; stdout: \(standardOutput) stderr: \(standardError)")
            }
            // Wait for the next change of the file, then drain the watch's events.
            do {
                try await watch.perform(.readable, boundTo: nil, deadline: deadline) { fd -> Bool? in
                    var events = [UInt8](repeating: 0, count: 4096)
                    let read = try Syscall.nonBlocking("read") {
                        events.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, 4096) }
                    }
                    return read.map { _ in true }
                }
            } catch is DeadlineExceededError {
                continue  // reported above, with the output so far
            }
        }
    }

    /// Runs the demo to its end.
    public static func run(_ arguments: [String], timeout: Duration = .seconds(120)) async throws -> (
        status: Int32, process: DemoProcess
    ) {
        let process = try DemoProcess(arguments)
        return (try await process.exitStatus(timeout: timeout), process)
    }
}
