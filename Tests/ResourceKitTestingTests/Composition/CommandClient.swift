import ResourceKit
import SocketAdapter

// The worked example of Docs/WritingAnAdapter.md, "Composition" (the guide quotes this file between the
// markers; GuideSnippetTests keeps them the same). It passes every check of the kit: CommandClientKitTests.

// snippet: command-client (quoted in Docs/WritingAnAdapter.md)
/// A client for ``CommandServer``'s protocol, built on two `SocketConnection`s: one for commands, one for
/// unblock requests. One logical resource: the sockets are parts of its registration.
///
/// Cancellation: an operation whose task is cancelled (operation level: the client lives on) unblocks its
/// command on the server from `onCancel`; the late reply is discarded by the next operation (replies carry
/// the command's tag). Cancelling the client (its scope, a deadline) does the same, then shuts both sockets
/// down; a deadline surfaces as `DeadlineExceededError`.
final class CommandClient: ManagedResource {
    static let kind = ResourceKind(name: "command.client", closeTimeout: .seconds(2))

    struct Parts {
        let commands: SocketConnection
        let control: SocketConnection
        let id: Int
    }

    let registration = HandleSlot()
    let parts = Locked<Parts?>(nil)
    let tags = Locked(0)

    /// The server's name for this client (for `STATUS`).
    var id: Int { parts.withLock { $0?.id ?? 0 } }

    static func connect(port: Int, in scope: ResourceScope) async throws -> CommandClient {
        let client = CommandClient()
        let handle = try await client.registration.register(client, in: scope, kind: kind, label: "command client")
        // Registered in the client's parts: cancelled with its reason, closed after it.
        let commands = try await SocketConnection.connect(
            host: "127.0.0.1", port: port, in: handle.parts, label: "commands")
        let control = try await SocketConnection.connect(
            host: "127.0.0.1", port: port, in: handle.parts, label: "control")
        guard let hello = try await commands.readLine(), let id = Int(hello.dropFirst("HELLO ".count)) else {
            throw CommandClientError.protocolViolation
        }
        client.parts.withLock { $0 = Parts(commands: commands, control: control, id: id) }
        return client
    }

    /// Runs `command` (`ECHO`, `BLOCK`) with `text` and returns the reply.
    ///
    /// Cancellation: a checkpoint first (in a cancelled task nothing is sent). Cancelled while the server
    /// works, it asks the server to stop that command and throws at once.
    func run(_ command: String, _ text: String) async throws -> String {
        guard let parts = parts.withLock({ $0 }) else { throw CommandClientError.notConnected }
        let tag = tags.withLock {
            $0 += 1
            return "t\($0)"
        }
        let unblock = Array("UNBLOCK \(parts.id) \(tag)\n".utf8)
        return try await withResourceOperation(boundTo: registration.handle) { _ in
            _ = try? parts.control.trySend(unblock)  // stop the work on the server; never waits
        } _: {
            try await parts.commands.write("\(tag) \(command) \(text)\n")
            while let line = try await parts.commands.readLine() {
                // A reply to an earlier, cancelled command arrives late: skip it.
                if line.hasPrefix(tag + " ") { return String(line.dropFirst(tag.count + 1)) }
            }
            throw CommandClientError.protocolViolation
        }
    }

    func cancel() {}  // the operations' onCancel and the parts do the work

    func close() async throws {}  // the parts close after it; the closed handle stays for later checks
}
// end snippet

/// What ``CommandClient`` throws besides cancellation and socket errors.
enum CommandClientError: Error {
    case notConnected
    case protocolViolation
}
