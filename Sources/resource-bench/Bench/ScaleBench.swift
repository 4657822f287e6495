import DemoRuntime
import Foundation
import Glibc
import ResourceKit
import ResourceKitIO
import ResourceKitTesting
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
        let peer = try SilentPeerMode.spawn()
        let reactor = IOReactor(name: "bench.scale")
        defer { reactor.shutdown() }
        let fdsBefore = openDescriptors()
        var result = Result(lastReturned: .zero, bytesPerResource: 0, count: count, fdsAfter: 0, fdsBefore: fdsBefore)
        try await withResourceScope("bench.scale", registry: ResourceRegistry()) { scope in
            let baseline = StreamMemoryBench.residentKiB()
            var connections: [SocketConnection] = []
            connections.reserveCapacity(count)
            for _ in 0..<count {
                connections.append(
                    try await SocketConnection.connect(host: "127.0.0.1", port: peer.port, in: scope, reactor: reactor))
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
        await peer.stop()
        result.fdsAfter = openDescriptors()
        return result
    }

    static func openDescriptors() -> Int { DescriptorLedger.now().count }
}

/// The benchmark's silent peer: this executable in its hidden `_silent-peer` mode (no python needed).
enum SilentPeerMode {
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

    /// Starts `resource-demo _silent-peer` through the testing kit's ``SilentPeer``.
    static func spawn() throws -> SilentPeer {
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
        return try SilentPeer(command: [executable, "_silent-peer"])
    }
}
