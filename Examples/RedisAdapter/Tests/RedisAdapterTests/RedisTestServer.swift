import Foundation
import Glibc
import ResourceKit
import ResourceKitIO
import ResourceKitProcesses

/// A throwaway `redis-server` on a free loopback port: no persistence, killed with this process whatever ends it
/// (the parent-death signal), stopped and reaped by ``stop()``. Ready when it said so on its standard output (an
/// event, not a sleep). Scripts become killable after 10 ms (`lua-time-limit`): before that, Redis reads no other
/// client's command, `SCRIPT KILL` included, so a script's stop takes at least that long.
final class RedisTestServer: Sendable {
    let port: Int
    private let pid: Int32

    struct Unavailable: Error, CustomStringConvertible {
        let description: String
    }

    init() async throws {
        var lastFailure = "no attempt"
        for _ in 0..<5 {
            let port = try Self.freePort()
            let pipe = try Syscall.makePipe()
            let pid: Int32
            do {
                pid = try Syscall.spawn(
                    [
                        "redis-server", "--port", String(port), "--bind", "127.0.0.1", "--save", "",
                        "--appendonly", "no", "--lua-time-limit", "10", "--protected-mode", "no",
                        "--enable-debug-command", "yes",
                    ],
                    standardOutput: .descriptor(pipe.write), standardError: .standardOutput, diesWithParent: true)
            } catch {
                Syscall.close(pipe.read)
                Syscall.close(pipe.write)
                throw Unavailable(description: "redis-server could not be started: \(error)")
            }
            Syscall.close(pipe.write)
            let output = try await BlockingPool.shared.run { Self.readUntilReady(pipe.read) }
            Syscall.close(pipe.read)
            if output.ready {
                self.port = port
                self.pid = pid
                return
            }
            kill(pid, SIGKILL)
            _ = try? await BlockingPool.shared.run { try Syscall.waitForExit(pid) }
            lastFailure = output.text  // the port was taken meanwhile, most likely: try another
        }
        throw Unavailable(description: "redis-server did not start: \(lastFailure)")
    }

    /// Reads the server's output until it is ready or its output ends (it exited). Blocking.
    private static func readUntilReady(_ fd: Int32) -> (ready: Bool, text: String) {
        var text = ""
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count <= 0 { return (false, text) }
            text += String(decoding: buffer[0..<count], as: UTF8.self)
            if text.contains("Ready to accept connections") { return (true, text) }
        }
    }

    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Unavailable(description: "socket failed") }
        defer { Glibc.close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var size = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                bind(fd, raw, size) == 0 && getsockname(fd, raw, &size) == 0
            }
        }
        guard bound else { throw Unavailable(description: "no free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Stops the server and reaps it, on the blocking pool.
    func stop() async {
        kill(pid, SIGTERM)
        _ = try? await BlockingPool.shared.run { try Syscall.waitForExit(self.pid) }
    }
}
