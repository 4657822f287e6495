import ResourceKit
import ResourceKitTesting
import SocketAdapter

/// A request/response server with a server-side blocking command, in its own process (Python 3), as
/// Postgres is to a query: the tests' stand-in for the protocols third-party adapters speak.
///
/// The protocol, one line each way:
/// - on connect the server says `HELLO <client id>`;
/// - `<tag> ECHO <text>` replies `<tag> <text>`;
/// - `<tag> BLOCK <text>` blocks this client on the server until unblocked, then replies `<tag> <text>`
///   (late, if the client gave up meanwhile); the server reads nothing else from the client until then;
/// - `UNBLOCK <client id> <tag>`, on any connection, unblocks that client's command with that tag, now or
///   when it arrives (the two connections race: an unblock may overtake its command); no reply, like a
///   Postgres cancel request;
/// - `RELEASE <client id>` ends that client's blocked command, as the data it waits for would, now or when the
///   command arrives (the kit releases once the operation is registered, which can be before its command reached
///   the server); no reply;
/// - `STATUS <client id>` replies `BLOCKED` or `IDLE` (the probe of the external work).
///
/// Started and stopped like a ``SilentPeer`` (the same process contract: prints its port, exits when its
/// input closes), so its sockets are outside the test process's descriptor accounting.
struct CommandServer: Sendable {
    let process: SilentPeer
    var port: Int { process.port }

    static func start() throws -> CommandServer {
        CommandServer(process: try SilentPeer(command: ["python3", "-c", script]))
    }

    func stop() async { await process.stop() }

    /// Whether `client` has a command blocked on the server: the external-work probe.
    func isBlocked(_ client: Int) async throws -> Bool {
        try await ask("STATUS \(client)\n") == "BLOCKED"
    }

    /// Completes `client`'s blocked command (its reply goes out), as the data it waited for would; a command that has
    /// not reached the server yet completes when it does.
    func release(_ client: Int) async throws {
        _ = try await ask("RELEASE \(client)\n", expectingReply: false)
    }

    /// One connection per question, in a registry of its own (the test's, not the adapter's).
    private func ask(_ line: String, expectingReply: Bool = true) async throws -> String? {
        try await withResourceScope("probe", registry: ResourceRegistry()) { scope in
            let connection = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
            _ = try await connection.readLine()  // HELLO
            try await connection.write(line)
            return expectingReply ? try await connection.readLine() : nil
        }
    }

    private static let script = """
        import os, socket, sys, threading
        lock = threading.Lock()
        blocked = {}
        cancelled = set()
        released = set()
        next_id = [0]
        def serve(conn, cid):
            reader = conn.makefile("rb")
            conn.sendall(b"HELLO %d\\n" % cid)
            for raw in reader:
                words = raw.decode().rstrip("\\n").split(" ", 2)
                if words[0] == "UNBLOCK":
                    with lock:
                        entry = blocked.get(int(words[1]))
                        if entry and entry[0] == words[2]:
                            entry[1].set()
                        else:
                            cancelled.add((int(words[1]), words[2]))
                elif words[0] == "RELEASE":
                    with lock:
                        entry = blocked.get(int(words[1]))
                        if entry:
                            entry[1].set()
                        else:
                            released.add(int(words[1]))
                elif words[0] == "STATUS":
                    with lock:
                        state = "BLOCKED" if int(words[1]) in blocked else "IDLE"
                    conn.sendall((state + "\\n").encode())
                elif len(words) == 3 and words[1] == "ECHO":
                    conn.sendall(("%s %s\\n" % (words[0], words[2])).encode())
                elif len(words) == 3 and words[1] == "BLOCK":
                    event = threading.Event()
                    with lock:
                        if (cid, words[0]) in cancelled:
                            event.set()
                        elif cid in released:
                            released.discard(cid)
                            event.set()
                        blocked[cid] = (words[0], event)
                    event.wait()
                    with lock:
                        del blocked[cid]
                    try:
                        conn.sendall(("%s %s\\n" % (words[0], words[2])).encode())
                    except OSError:
                        return
                else:
                    conn.sendall(b"ERROR\\n")
        def accept(server):
            while True:
                conn, _ = server.accept()
                with lock:
                    next_id[0] += 1
                    cid = next_id[0]
                threading.Thread(target=serve, args=(conn, cid), daemon=True).start()
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0))
        server.listen(1024)
        threading.Thread(target=accept, args=(server,), daemon=True).start()
        os.write(1, (str(server.getsockname()[1]) + "\\n").encode())
        while os.read(0, 1024):
            pass
        os._exit(0)
        """
}
