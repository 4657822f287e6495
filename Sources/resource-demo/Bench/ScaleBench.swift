import Foundation
import Glibc
import ResourceKit
import SocketAdapter

/// Figure 6: thousands of concurrent blocked socket reads cancelled at once. The peers' ends live in a child
/// process (`resource-demo _silent-peer`), so the descriptor budget is this process's sockets only.
enum ScaleBench {
    struct Result {
        var lastReturned: Duration
        var bytesPerResource: Int
        var count: Int
        var fdsAfter: Int
        var fdsBefore: Int
    }

    static func run(count: Int) async throws -> Result {
        let peer = try SilentPeer.spawn()
        defer { peer.stop() }
        let reactor = IOReactor(name: "bench.scale")
        defer { reactor.shutdown() }
        let fdsBefore = openDescriptors()
        var result = Result(lastReturned: .zero, bytesPerResource: 0, count: count, fdsAfter: 0, fdsBefore: fdsBefore)
        try await withResourceScope("bench.scale", registry: ResourceRegistry()) { scope in
            let baseline = StreamMemoryBench.residentKiB()
            var connections: [SocketConnection] = []
            connections.reserveCapacity(count)
            for _ in 0..<count {
                connections.append(try await SocketConnection.connect(host: "127.0.0.1", port: peer.port, in: scope, reactor: reactor))
            }
            // Owner: this figure, which cancels and awaits it.
            let readers = Task {
                await withTaskGroup(of: Void.self) { group in
                    for connection in connections {
                        group.addTask { _ = try? await connection.read(upTo: 64) }  // the cancellation is what is timed
                    }
                }
            }
            while reactor.waitingDescriptorCount < count { try await Task.sleep(for: .milliseconds(5)) }
            result.bytesPerResource = (StreamMemoryBench.residentKiB() - baseline) * 1024 / count
            let start = ContinuousClock.now
            readers.cancel()
            await readers.value
            result.lastReturned = .now - start
        }
        result.fdsAfter = openDescriptors()
        return result
    }

    static func openDescriptors() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1
    }
}

/// A loopback listener in a child process that accepts every connection and never reads or writes.
struct SilentPeer {
    let pid: pid_t
    let port: Int
    let input: Int32

    /// `resource-demo _silent-peer`: the child's side. Prints the port, holds connections until stdin closes.
    static func serve() -> Never {
        guard let (listener, port) = try? RawLoopback.listener(backlog: 4096) else {
            Console.error("resource-demo _silent-peer: cannot listen on 127.0.0.1")
            exit(1)
        }
        Console.line("\(port)")
        Thread {
            var held: [Int32] = []
            while true {
                let fd = accept(listener, nil, nil)
                if fd >= 0 { held.append(fd) }
            }
        }.start()
        var byte: UInt8 = 0
        while read(0, &byte, 1) > 0 {}
        exit(0)
    }

    static func spawn() throws -> SilentPeer {
        var input: [Int32] = [0, 0]
        var output: [Int32] = [0, 0]
        guard pipe(&input) == 0, pipe(&output) == 0 else { throw SystemError.current("pipe") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, input[0], 0)
        posix_spawn_file_actions_adddup2(&actions, output[1], 1)
        posix_spawn_file_actions_addclose(&actions, input[1])
        posix_spawn_file_actions_addclose(&actions, output[0])
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
        var argv: [UnsafeMutablePointer<CChar>?] = [strdup(executable), strdup("_silent-peer"), nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, nil, &argv, environ)
        Syscall.close(input[0])
        Syscall.close(output[1])
        defer { Syscall.close(output[0]) }
        guard spawned == 0 else { throw SystemError("posix_spawn", errno: spawned) }
        var text = ""
        var byte: UInt8 = 0
        while read(output[0], &byte, 1) == 1, byte != 10 { text.append(Character(UnicodeScalar(byte))) }
        guard let port = Int(text) else { throw SystemError("silent peer", errno: 0) }
        return SilentPeer(pid: pid, port: port, input: input[1])
    }

    func stop() {
        Syscall.close(input)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
    }
}
