#if canImport(Glibc)
import Glibc
#endif

/// A real peer in another process: a loopback listener that accepts every connection and holds it silently
/// (never reads, never writes) until stopped. Keeps the far ends of thousands of sockets out of the test
/// process's descriptor budget. Spawned with `posix_spawn` and reaped with `waitpid` (Foundation's `Process`
/// sometimes missed a child's exit here).
public final class SilentPeerProcess: @unchecked Sendable {
    // @unchecked Sendable: `pid` and `stdinWriter` are set in `init` and only used again by `stop()`, which a
    // test calls once.
    private static let script = """
    import os, selectors, socket, sys
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(4096)
    server.setblocking(False)
    os.write(1, (str(server.getsockname()[1]) + "\\n").encode())
    selector = selectors.DefaultSelector()
    selector.register(server, selectors.EVENT_READ)
    selector.register(0, selectors.EVENT_READ)
    held = []
    while True:
        for key, _ in selector.select():
            if key.fileobj is server:
                while True:
                    try:
                        connection, _ = server.accept()
                        held.append(connection)
                    except BlockingIOError:
                        break
            elif not os.read(0, 1024):
                sys.exit(0)
    """

    /// The port it listens on (127.0.0.1).
    public let port: Int
    private let pid: pid_t
    private var stdinWriter: Int32

    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    /// Starts the peer with python3.
    /// - Throws: ``Unavailable`` when python3 cannot be started or does not report its port.
    public init() throws {
        var input: [Int32] = [0, 0]
        var output: [Int32] = [0, 0]
        guard pipe(&input) == 0, pipe(&output) == 0 else {
            throw Unavailable(description: "pipe failed")
        }
        for fd in input + output { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, input[0], 0)
        posix_spawn_file_actions_adddup2(&actions, output[1], 1)
        let words: [String] = ["/usr/bin/env", "python3", "-c", Self.script]
        var argv: [UnsafeMutablePointer<CChar>?] = words.map { word in word.withCString { strdup($0) } }
        argv.append(nil)
        defer { argv.forEach { free($0) } }
        var child: pid_t = 0
        let spawned = posix_spawn(&child, "/usr/bin/env", &actions, nil, argv, environ)
        close(input[0])
        close(output[1])
        guard spawned == 0 else {
            close(input[1])
            close(output[0])
            throw Unavailable(description: "could not start python3 for the peer process (error \(spawned))")
        }
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while read(output[0], &byte, 1) == 1, byte != 10 { line.append(byte) }
        close(output[0])
        guard let port = Int(String(decoding: line, as: UTF8.self)) else {
            close(input[1])
            var status: Int32 = 0
            waitpid(child, &status, 0)
            throw Unavailable(description: "the peer process (python3) did not report its port")
        }
        self.port = port
        self.pid = child
        self.stdinWriter = input[1]
    }

    /// Stops the peer (closing every connection it held) and reaps it.
    public func stop() {
        guard stdinWriter >= 0 else { return }
        close(stdinWriter)
        stdinWriter = -1
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    }
}
