import DemoRuntime
import Foundation
import ResourceKit
import ResourceKitIO
import SocketAdapter

extension Bench {
    /// `resource-bench --read-cancels N`: N cancels of a socket read parked on the reactor and N of the Swift floor,
    /// interleaved round by round (the `bench` figure's own method: the same 200 µs pause before each cancel), on
    /// one connection to a silent peer in this process. Prints each one's median cancel → return, so that `perf
    /// stat` or `perf record` can look at the read cancel path alone:
    ///
    /// ```
    /// perf stat -e context-switches,task-clock .build/release/resource-bench --read-cancels 20000
    /// ```
    static func readCancels(rounds: Int) async throws {
        let reactor = IOReactor(name: "bench.cancels")
        defer { reactor.shutdown() }
        var ours: [Duration] = []
        var floor: [Duration] = []
        try await withResourceScope("bench.cancels", registry: ResourceRegistry()) { scope in
            let listener = try await SocketListener.bind(in: scope)
            let connection = try await SocketConnection.connect(
                host: "127.0.0.1", port: listener.port, in: scope, reactor: reactor)
            let peer = try await listener.accept(in: scope)
            for _ in 0..<rounds {
                floor.append(await ReadCancelBench.floorSample())
                // Owner: this round (`cancelLatency` cancels and awaits it). A cancelled read leaves the
                // connection usable: the next round reads on it again.
                let task = Task { try await connection.read(upTo: 64) }
                ours.append(await ReadCancelBench.cancelLatency(task) { reactor.waitingDescriptorCount > 0 })
            }
            peer.resetConnection()
            connection.resetConnection()
        }
        func median(_ values: [Duration]) -> Double {
            Samples.convert(values.sorted()[values.count / 2], to: "us")
        }
        let (read, bare) = (median(ours), median(floor))
        let figures = String(format: "socket read %.1f us, Swift floor %.1f us, ratio %.2f", read, bare, read / bare)
        Console.line("\(rounds) read cancels, medians: \(figures)")
    }
}

extension Bench {
    /// `resource-bench --scale-cancels R`: R rounds of the bench's "10,000 blocked socket reads: cancel -> last
    /// return" figure alone (each round opens 10,000 connections to a silent peer process, parks a read on each and
    /// cancels them all at once), printing every round's time, so that the figure's spread and `perf record` can be
    /// looked at without the rest of the bench:
    ///
    /// ```
    /// .build/release/resource-bench --scale-cancels 10
    /// ```
    static func scaleCancels(rounds: Int) async throws {
        var times: [Double] = []
        for _ in 0..<rounds {
            let result = try await ScaleBench.run(count: 10_000)
            times.append(Samples.convert(result.lastReturned, to: "ms"))
        }
        let each = times.map { String(format: "%.1f", $0) }.joined(separator: " ")
        let sorted = times.sorted()
        let summary = String(format: "median %.1f ms, max %.1f ms", sorted[sorted.count / 2], sorted[sorted.count - 1])
        Console.line("10000 blocked reads, cancel -> last return, \(rounds) rounds (ms): \(each); \(summary)")
    }
}
