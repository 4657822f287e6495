import ResourceKit
import ResourceKitIO
import ResourceKitProcesses

#if canImport(Glibc)
import Glibc
#endif

/// A real peer in another process: a loopback listener that accepts every connection and holds it silently
/// (never reads, never writes) until stopped. It keeps the far ends of thousands of sockets out of the
/// calling process's descriptor budget, and gives a read something that never answers.
///
/// The peer is any program that listens on 127.0.0.1, prints its port and a newline on standard output,
/// holds connections, and exits when its standard input closes: ``python()`` is such a program; the
/// benchmark uses its own executable (`resource-demo _silent-peer`).
public final class SilentPeer: Sendable {
    /// The port it listens on (127.0.0.1).
    public let port: Int
    private let process: PeerProcess

    /// Why the peer could not be started.
    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    /// Starts `command` (a path, or a name on `PATH`) and waits for the port it prints.
    /// - Throws: ``Unavailable`` when it cannot be started or does not print a port.
    public init(command: [String]) throws {
        let process = try PeerProcess(command)
        defer { Syscall.close(process.output) }
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while (try? Syscall.value("read", { read(process.output, &byte, 1) })) == 1, byte != 10 { line.append(byte) }
        guard let port = Int(String(decoding: line, as: UTF8.self)) else {
            process.stopNow()
            throw Unavailable(description: "the peer process did not report its port")
        }
        self.port = port
        self.process = process
    }

    /// A peer written in Python 3 (`python3` on `PATH`).
    public static func python() throws -> SilentPeer {
        try SilentPeer(command: ["python3", "-c", pythonScript])
    }

    /// Stops the peer (closing every connection it held: it exits as soon as its input closes) and reaps it,
    /// waiting on the blocking pool, never on the cooperative pool. Idempotent.
    ///
    /// Cancellation: a cancelled caller returns at once; the peer still exits and is reaped.
    public func stop() async {
        await process.stop()
    }

    deinit {
        // Dropped without stop(): the peer still exits (its input closes) and is reaped on the blocking pool.
        process.stopSoon()
    }

    private static let pythonScript = """
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
}
