@_spi(Testing) import SocketAdapter
import ResourceKit
import ResourceKitTesting
import TestSupport
import Testing

/// The guide's composed adapter passes every check of the kit, and each bug seeded into it is caught by the
/// check that names it, with the fix in the message.
@Suite(.serialized) struct CommandClientKitTests {
    static func kit(_ server: CommandServer, _ bug: CommandClient.Bug?) -> AdapterConformance<CommandClient> {
        AdapterConformance(
            "command client (\(bug.map(\.rawValue) ?? "no bug"))",
            make: { scope in try await CommandClient.connect(port: server.port, in: scope) },
            blockingOperation: { client in _ = try await client.run("BLOCK", "kit", seeding: bug) },
            completeOperation: { client in try await server.release(client.id) },
            ownedDescriptors: { client in client.ownedDescriptors },
            exchange: { client, token in try await client.run("ECHO", token, seeding: bug) },
            externalWorkRunning: { client in try await server.isBlocked(client.id) }
        )
    }

    @Test func theComposedClientPassesEveryCheck() async throws {
        let server = try CommandServer.start()
        let report = try await runConformance(Self.kit(server, nil))
        await server.stop()
        print(report)
        #expect(report.passed, "\(report)")
        let ran = report.checks.filter { !$0.skipped }.map(\.name)
        for check in [
            "reuse after", "a scope deadline", "external work stops on an operation",
            "external work stops on a resource", "checkpoint",
        ] {
            #expect(ran.contains { $0.hasPrefix(check) }, "'\(check)' did not run:\n\(report)")
        }
    }

    @Test(arguments: [
        (CommandClient.Bug.lateReplyLeaks, "reuse after an operation-level cancel", "instead of its own reply"),
        (.lateReplyFailsTheNext, "reuse after an operation-level cancel", "SeededLateReply: a reply that was not ours"),
        (.droppedDeadlineReason, "a scope deadline surfaces", "instead of DeadlineExceededError"),
        (.externalWorkNotStopped, "external work stops on an operation-level cancel", "stop the work in its onCancel"),
        (.writeInCancelledTask, "checkpoint", "must be a checkpoint"),
        (.stopsLate, "external work stops on an operation-level cancel", "and stopped only later"),
    ])
    func eachSeededBugIsCaughtWithTheRightMessage(bug: CommandClient.Bug, check: String, message: String)
        async throws
    {
        let server = try CommandServer.start()
        let report = try await exclusively { await Self.kit(server, bug).inTheTestProcess.run() }
        await server.stop()
        print(report)
        let failing = report.failures.filter { $0.name.hasPrefix(check) }
        #expect(!failing.isEmpty, "expected '\(check)' to fail:\n\(report)")
        #expect(failing.contains { $0.failure?.contains(message) == true }, "expected '\(message)':\n\(report)")
    }
}

extension CommandClient {
    /// Both parts' sockets, for the kit's leak check.
    var ownedDescriptors: [Int32] {
        parts.withLock { $0 }.map { $0.commands.ownedDescriptors + $0.control.ownedDescriptors } ?? []
    }
}
