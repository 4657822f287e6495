import ResourceKit
import SocketAdapter

/// ``CommandClient/run(_:_:)`` with one bug seeded, for the kit's own tests: each bug is one a third-party
/// author made (issue #12), and each must be caught by the check named in ``CommandClientKitTests``.
extension CommandClient {
    enum Bug: String, CaseIterable, Sendable {
        /// Replies are not matched to their command: a cancelled command's late reply is returned to the next.
        case lateReplyLeaks
        /// A reply with another command's tag (a cancelled command's late reply) is taken as this command's
        /// failure, as a client that reads a late "query canceled" error as its own would.
        case lateReplyFailsTheNext
        /// A deadline is reported as `CancellationError`.
        case droppedDeadlineReason
        /// An operation-level cancel wakes the caller but leaves the command blocked on the server.
        case externalWorkNotStopped
        /// The command is written before the cancellation checkpoint: a cancelled task still sends it.
        case writeInCancelledTask
        /// The external work is stopped, but 200 ms after the cancel (a stop handed to a timer, a retry loop).
        case stopsLate
    }

    func run(_ command: String, _ text: String, seeding bug: Bug?) async throws -> String {
        guard let bug else { return try await run(command, text) }
        guard let parts = parts.withLock({ $0 }) else { throw CommandClientError.notConnected }
        let tag = tags.withLock {
            $0 += 1
            return "t\($0)"
        }
        let request = Array("\(tag) \(command) \(text)\n".utf8)
        if bug == .writeInCancelledTask { _ = try parts.commands.trySend(request) }
        let unblock = Array("UNBLOCK \(parts.id) \(tag)\n".utf8)
        do {
            return try await withResourceOperation(boundTo: registration.handle) { _ in
                if bug == .stopsLate {
                    // Owner: none; it ends on its own, 200 ms later (the seeded bug).
                    Task.detached {
                        try? await Task.sleep(for: .milliseconds(200))
                        _ = try? parts.control.trySend(unblock)
                    }
                } else if bug != .externalWorkNotStopped {
                    _ = try? parts.control.trySend(unblock)
                }
            } _: {
                if bug != .writeInCancelledTask { try await parts.commands.write(request) }
                while let line = try await parts.commands.readLine() {
                    let (replyTag, reply) = (line.prefix { $0 != " " }, String(line.drop { $0 != " " }.dropFirst()))
                    if bug == .lateReplyLeaks || replyTag == tag { return reply }
                    if bug == .lateReplyFailsTheNext { throw SeededLateReply(line: line) }
                }
                throw CommandClientError.protocolViolation
            }
        } catch is DeadlineExceededError where bug == .droppedDeadlineReason {
            throw CancellationError()
        }
    }
}

/// What ``CommandClient/Bug/lateReplyFailsTheNext`` throws: the reply line it took for its own failure.
struct SeededLateReply: Error, CustomStringConvertible {
    let line: String
    var description: String { "a reply that was not ours: \(line)" }
}
