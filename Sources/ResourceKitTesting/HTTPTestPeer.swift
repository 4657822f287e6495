import Foundation
import ResourceKit
import ResourceKitIO

#if canImport(Glibc)
import Glibc
#endif

/// An HTTP/1.1-ish server in another process, for testing an HTTP adapter's cancellation: it answers by path,
/// and reports when each connection opens and closes, so that a test (or the kit, as `externalWorkRunning`) sees
/// the wire without a probe of its own.
///
/// Paths (`GET` or any method; the request's head ends at a blank line, a body is not read):
/// - `/answer`: `200 OK` with the body `ok` at once (the connection stays open: keep-alive);
/// - `/echo/<text>`: `200 OK` with the body `<text>` at once (for the kit's `exchange`);
/// - `/trickle`: `200 OK` with a 100-byte body, one byte every 50 ms;
/// - `/never`: no answer, ever (the connection is held until the client closes it);
/// - `/hold/<key>`: no answer until ``release(_:)`` with that key, then `200 OK` with the body `released`.
///
/// Each connection is numbered in the order it was accepted; ``connections`` gives its open and close times (taken
/// in this process when the peer's report arrives: within a millisecond of the event on a quiet machine). A close
/// is the client's (the peer reads the end of the stream or a reset); the peer itself never closes first. Runs
/// `python3`; its connections' far ends live in that process, not in the test's.
public final class HTTPTestPeer: Sendable {
    /// One connection the peer accepted.
    public struct Connection: Sendable, Equatable {
        public let number: Int
        public let opened: ContinuousClock.Instant
        /// When the client closed it (`nil` while it is open).
        public var closed: ContinuousClock.Instant?
        /// The path of the last request it sent (`nil` before the first).
        public var path: String?
    }

    /// The port it listens on (127.0.0.1).
    public let port: Int
    private let process: PeerProcess
    private let state = Locked<[Connection]>([])
    private let changes = Broadcast<Int>()

    /// Starts the peer (`python3` on `PATH`).
    /// - Throws: ``SilentPeer/Unavailable`` when it cannot be started.
    public init() throws {
        let process = try PeerProcess(["python3", "-c", Self.script])
        let reports = FileHandle(fileDescriptor: process.output, closeOnDealloc: true)
        guard let first = Self.readLine(reports), let port = Int(first) else {
            process.stopNow()
            throw SilentPeer.Unavailable(description: "the HTTP peer did not report its port")
        }
        self.port = port
        self.process = process
        // The reports' reader: a thread of its own for the peer's life (it ends when the peer exits).
        let thread = Thread { [state, changes] in
            while let line = Self.readLine(reports) {
                let now = ContinuousClock.now
                let words = line.split(separator: " ", maxSplits: 2).map(String.init)
                guard words.count >= 2, let number = Int(words[1]) else { continue }
                let open = state.withLock { connections -> Int in
                    switch words[0] {
                    case "open": connections.append(Connection(number: number, opened: now, closed: nil, path: nil))
                    case "close": connections[number].closed = now
                    case "request": connections[number].path = words.count > 2 ? words[2] : ""
                    default: break
                    }
                    return connections.count { $0.closed == nil }
                }
                changes.yield(open)
            }
        }
        thread.name = "rk.http-test-peer"
        thread.start()
    }

    /// Every connection so far, in the order accepted.
    public var connections: [Connection] { state.withLock { $0 } }

    /// How many connections are open now: usable as the kit's `externalWorkRunning` probe (`> 0`).
    public var openConnectionCount: Int { state.withLock { $0.count { $0.closed == nil } } }

    /// The open-connection count now, then every change: wait for "the client closed it" as an event.
    public func openConnectionCounts() -> AsyncStream<Int> {
        changes.subscribe(bufferingNewest: 64) { self.openConnectionCount }
    }

    /// Answers every request held as `/hold/<key>`, now and later.
    public func release(_ key: String) {
        process.send("release \(key)\n")
    }

    /// Stops the peer (every connection it held is closed) and reaps it on the blocking pool. Idempotent.
    ///
    /// Cancellation: a cancelled caller returns at once; the peer still exits and is reaped.
    public func stop() async {
        await process.stop()
    }

    deinit {
        process.stopSoon()
    }

    private static func readLine(_ handle: FileHandle) -> String? {
        var line: [UInt8] = []
        while true {
            guard let byte = try? handle.read(upToCount: 1), let first = byte.first else {
                return line.isEmpty ? nil : String(decoding: line, as: UTF8.self)
            }
            if first == 10 { return String(decoding: line, as: UTF8.self) }
            line.append(first)
        }
    }

    private static let script = """
        import os, selectors, socket, sys, time
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0))
        server.listen(4096)
        server.setblocking(False)
        def report(line):
            os.write(1, (line + "\\n").encode())
        report(str(server.getsockname()[1]))
        selector = selectors.DefaultSelector()
        selector.register(server, selectors.EVENT_READ)
        selector.register(0, selectors.EVENT_READ)
        conns = {}      # socket -> [number, buffer]
        held = {}       # key -> [socket]
        released = set()
        trickles = []   # [socket, bytes left, next time]
        count = 0
        def answer(sock, body):
            try:
                sock.sendall(("HTTP/1.1 200 OK\\r\\nContent-Length: %d\\r\\n\\r\\n%s" % (len(body), body)).encode())
            except OSError:
                pass
        def request(sock, head):
            number = conns[sock][0]
            line = head.split(b"\\r\\n", 1)[0].decode("latin-1").split(" ")
            path = line[1] if len(line) > 1 else "/"
            report("request %d %s" % (number, path))
            if path == "/answer":
                answer(sock, "ok")
            elif path.startswith("/echo/"):
                answer(sock, path[len("/echo/"):])
            elif path == "/trickle":
                try:
                    sock.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: 100\\r\\n\\r\\n")
                except OSError:
                    return
                trickles.append([sock, 100, time.monotonic()])
            elif path.startswith("/hold/"):
                key = path[len("/hold/"):]
                if key in released:
                    answer(sock, "released")
                else:
                    held.setdefault(key, []).append(sock)
        def close(sock):
            if sock not in conns:
                return
            number = conns.pop(sock)[0]
            selector.unregister(sock)
            sock.close()
            report("close %d" % number)
        pending = b""
        while True:
            timeout = None
            if trickles:
                timeout = max(0, min(t[2] for t in trickles) - time.monotonic())
            for key, _ in selector.select(timeout):
                if key.fileobj is server:
                    while True:
                        try:
                            sock, _ = server.accept()
                        except BlockingIOError:
                            break
                        sock.setblocking(False)
                        conns[sock] = [count, b""]
                        report("open %d" % count)
                        count += 1
                        selector.register(sock, selectors.EVENT_READ)
                elif key.fileobj == 0:
                    data = os.read(0, 1024)
                    if not data:
                        sys.exit(0)
                    pending += data
                    while b"\\n" in pending:
                        line, pending = pending.split(b"\\n", 1)
                        words = line.decode().split(" ")
                        if words[0] == "release" and len(words) == 2:
                            released.add(words[1])
                            for sock in held.pop(words[1], []):
                                if sock in conns:
                                    answer(sock, "released")
                else:
                    sock = key.fileobj
                    try:
                        data = sock.recv(65536)
                    except OSError:
                        data = b""
                    if not data:
                        close(sock)
                        continue
                    conns[sock][1] += data
                    while b"\\r\\n\\r\\n" in conns[sock][1]:
                        head, rest = conns[sock][1].split(b"\\r\\n\\r\\n", 1)
                        conns[sock][1] = rest
                        request(sock, head)
            now = time.monotonic()
            for trickle in list(trickles):
                sock, left, due = trickle
                if due > now:
                    continue
                if sock not in conns or left == 0:
                    trickles.remove(trickle)
                    continue
                try:
                    sock.send(b"x")
                except OSError:
                    trickles.remove(trickle)
                    continue
                trickle[1] = left - 1
                trickle[2] = now + 0.05
        """
}
