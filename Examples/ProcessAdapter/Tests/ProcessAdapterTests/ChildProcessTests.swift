import Foundation
import Glibc
import ProcessAdapter
import ResourceKit
@_spi(Testing) import ResourceKitIO
import ResourceKitTesting
import Testing

@Suite(.serialized) struct ChildProcessTests {
    @Test func passesTheConformanceKit() async throws {
        // snippet: process-kit (quoted in Docs/WritingAnAdapter.md)
        let kit = AdapterConformance<ChildProcess>(
            "ChildProcess",
            make: { scope in try await ChildProcess.spawn(["/bin/cat"], in: scope) },
            blockingOperation: { process in _ = try await process.read(upTo: 1) },
            completeOperation: { process in try process.send("x") },
            ownedDescriptors: { process in process.ownedDescriptors },
            exchange: { process, token in
                try process.send(token + "\n")  // cat echoes it
                return try await process.readLine() ?? ""
            }
        )
        let report = await kit.run()
        // end snippet
        print(report)
        #expect(report.passed, "\(report)")
    }

    @Test func standardOutputIsAStreamOfLines() async throws {
        try await withResourceScope("lines") { scope in
            let process = try await ChildProcess.spawn(["/bin/sh", "-c", "echo one; echo two"], in: scope)
            var lines: [String] = []
            for try await line in process.lines() { lines.append(line) }
            #expect(lines == ["one", "two"])
        }
    }

    /// A child that ignores SIGTERM is killed after the grace period; closing reaps it (no zombie).
    @Test func cancelTerminatesThenKillsAndCloseReaps() async throws {
        var pid: pid_t = 0
        let started = ContinuousClock.now
        try await withResourceScope("stubborn") { scope in
            let process = try await ChildProcess.spawn(
                ["/bin/sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"], grace: .milliseconds(300),
                in: scope)
            pid = process.pid
            #expect(try await process.readLine() == "ready")
            scope.cancel()
        }
        let elapsed = ContinuousClock.now - started
        #expect(elapsed >= .milliseconds(300), "SIGKILL came after the grace period, not before")
        #expect(elapsed < .seconds(20), "SIGKILL never came")
        #expect(!FileManager.default.fileExists(atPath: "/proc/\(pid)"), "reaped: no zombie left")
    }

    @Test func cancellingTheTaskStopsAReadAtOnce() async throws {
        let task = Task {
            try await withResourceScope("read") { scope in
                let process = try await ChildProcess.spawn(["/bin/sleep", "60"], in: scope)
                return try await process.read(upTo: 64)
            }
        }
        // The event: the read is parked in the reactor (this test process has no other waiter).
        try await until("the read parks", IOReactor.shared.waitingDescriptorCounts()) { $0 > 0 }
        let cancelled = ContinuousClock.now
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        // Generous: a stalled machine must not fail it; a read that missed the cancel waits for the 60 s sleep.
        #expect(ContinuousClock.now - cancelled < .seconds(5))
    }
}
