import Foundation

/// A real peer in another process: a loopback listener that accepts every connection and holds it silently
/// (never reads, never writes) until stopped. Keeps the far ends of thousands of sockets out of the test
/// process's descriptor budget.
public final class SilentPeerProcess: @unchecked Sendable {
    // @unchecked Sendable: the process and pipe are created in `init` and only touched again by `stop()`,
    // which tests call once from the test's own task.
    private static let script = """
    import os, selectors, socket, sys
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(4096)
    server.setblocking(False)
    print(server.getsockname()[1], flush=True)
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
    private let process = Process()
    private let input = Pipe()

    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    /// Starts the peer with python3.
    /// - Throws: ``Unavailable`` when python3 cannot be started or does not report its port.
    public init() throws {
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", Self.script]
        process.standardInput = input
        process.standardOutput = output
        do {
            try process.run()
        } catch {
            throw Unavailable(description: "could not start python3 for the peer process: \(error)")
        }
        var line = Data()
        while let byte = try output.fileHandleForReading.read(upToCount: 1), !byte.isEmpty, byte != Data([10]) {
            line.append(byte)
        }
        guard let port = Int(String(decoding: line, as: UTF8.self)) else {
            process.terminate()
            throw Unavailable(description: "the peer process did not report its port")
        }
        self.port = port
    }

    /// Stops the peer (closing every connection it held) and waits for it to exit.
    public func stop() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}
