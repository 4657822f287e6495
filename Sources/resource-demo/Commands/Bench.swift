import Foundation
import CSystemShims
import FileAdapter
import Glibc
import PostgresAdapter
import ResourceKit
import SocketAdapter

/// `resource-demo bench`: cancel-to-return latencies of blocked operations, measured from a task on the
/// cooperative pool (never the main actor). Build with `-c release` for meaningful figures.
enum Bench {
    struct Figure {
        let name: String
        var samples: [Duration]

        func quantile(_ q: Double) -> Duration {
            let sorted = samples.sorted()
            return sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * q).rounded()))]
        }

        func row(json: Bool) -> String {
            let us = { (d: Duration) in Double(d.microseconds) }
            if json {
                return "{\"figure\": \"\(name)\", \"unit\": \"us\", \"median\": \(us(quantile(0.5))), \"p90\": \(us(quantile(0.9))), \"p99\": \(us(quantile(0.99))), \"samples\": \(samples.count)}"
            }
            return "\(name.padding(toLength: 44, withPad: " ", startingAt: 0)) \(pad(us(quantile(0.5)))) \(pad(us(quantile(0.9)))) \(pad(us(quantile(0.99))))  n=\(samples.count)"
        }

        private func pad(_ value: Double) -> String {
            let text = String(format: "%.1f", value)
            return String(repeating: " ", count: max(0, 10 - text.count)) + text
        }
    }

    static func run(quick: Bool, json: Bool, postgres: String?) async throws {
        let rounds = quick ? 30 : 300
        var figures: [Figure] = []
        var trailing: [String] = []
        figures.append(try await socketRead(rounds: rounds))
        figures.append(try await fifoRead(rounds: rounds))
        // One throwaway cluster (unless --postgres names a server) for every Postgres figure.
        let embedded = postgres == nil ? try await EmbeddedPostgres.start() : nil
        let conninfo = embedded?.conninfo ?? postgres ?? ""
        do {
            try await postgresFigures(quick: quick, json: json, conninfo: conninfo, into: &figures, lines: &trailing)
        } catch {
            await embedded?.stop()
            throw error
        }
        await embedded?.stop()
        if !json {
            print("figure                                           median        p90        p99   (µs)")
        }
        for figure in figures { print(figure.row(json: json)) }
        for line in trailing { print(line) }
    }

    static func postgresFigures(
        quick: Bool, json: Bool, conninfo: String, into figures: inout [Figure], lines trailing: inout [String]
    ) async throws {
        figures += try await postgresCancel(rounds: quick ? 10 : 50, conninfo: conninfo)
        if !quick {
            let streamRows = Int(ProcessInfo.processInfo.environment["BENCH_STREAM_ROWS"] ?? "") ?? 10_000_000
            let (rows, growth, elapsed) = try await streamMemory(rows: streamRows, conninfo: conninfo)
            let line = json
                ? "{\"figure\": \"stream rows: resident memory growth\", \"unit\": \"KiB\", \"rows\": \(rows), \"growth_after_first_100k\": \(growth), \"seconds\": \(elapsed)}"
                : "stream \(rows) rows (single-row mode): resident memory grew \(growth) KiB after the first 100,000 rows, in \(elapsed) s"
            trailing.append(line)
        }
    }

    /// Resident set size, KiB.
    static func residentKiB() -> Int {
        guard let file = fopen("/proc/self/statm", "r") else { return 0 }
        defer { fclose(file) }
        var size = 0, resident = 0
        withUnsafeMutablePointer(to: &size) { sizePointer in
            withUnsafeMutablePointer(to: &resident) { residentPointer in
                _ = withVaList([sizePointer, residentPointer]) { vfscanf(file, "%ld %ld", $0) }
            }
        }
        return resident * Int(sysconf(Int32(_SC_PAGESIZE))) / 1024
    }

    /// Streams `rows` rows and reports how much resident memory grew after the first 100,000.
    static func streamMemory(rows: Int, conninfo: String) async throws -> (Int, Int, Double) {
        let start = ContinuousClock.now
        var baseline = 0
        var count = 0
        try await withResourceScope("bench.stream", registry: ResourceRegistry()) { scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            for try await row in try await connection.stream("SELECT generate_series(1, $1::int8)", [rows]) {
                count += 1
                if count == 100_000 { baseline = residentKiB() }
                if count % 100_000 == 0, ProcessInfo.processInfo.environment["BENCH_TRACE"] != nil {
                    print("rows \(count): rss \(residentKiB()) KiB after \(ContinuousClock.now - start)")
                }
                _ = row
            }
        }
        let seconds = Double((ContinuousClock.now - start).microseconds) / 1_000_000
        return (count, residentKiB() - baseline, (seconds * 10).rounded() / 10)
    }

    /// Cancels `task` once `parked()` holds and returns cancel-to-return.
    static func cancelLatency<T: Sendable>(_ task: Task<T, any Error>, parked: () -> Bool) async -> Duration {
        while !parked() { await Task.yield() }
        let start = ContinuousClock.now
        task.cancel()
        _ = await task.result
        return ContinuousClock.now - start
    }

    static func socketRead(rounds: Int) async throws -> Figure {
        let reactor = IOReactor(name: "bench.socket")
        defer { reactor.shutdown() }
        var figure = Figure(name: "socket read cancel -> return", samples: [])
        try await withResourceScope("bench.socket", registry: ResourceRegistry()) { scope in
            let listener = try await SocketListener.bind(in: scope)
            for _ in 0..<rounds {
                let connection = try await SocketConnection.connect(host: "127.0.0.1", port: listener.port, in: scope, reactor: reactor)
                let peer = try await listener.accept(in: scope)
                let task = Task { try await connection.read(upTo: 64) }
                figure.samples.append(await cancelLatency(task) { reactor.waitingDescriptorCount > 0 })
                connection.resetConnection()
                peer.resetConnection()
            }
        }
        return figure
    }

    static func fifoRead(rounds: Int) async throws -> Figure {
        let path = "/tmp/resource-demo-bench-\(getpid()).fifo"
        unlink(path)
        guard mkfifo(path, 0o600) == 0 else { throw SystemError.current("mkfifo") }
        defer { unlink(path) }
        let writer = open(path, O_RDWR | O_NONBLOCK)
        defer { Syscall.close(writer) }
        let reactor = IOReactor(name: "bench.fifo")
        defer { reactor.shutdown() }
        var figure = Figure(name: "FIFO read cancel -> return", samples: [])
        try await withResourceScope("bench.fifo", registry: ResourceRegistry()) { scope in
            for _ in 0..<rounds {
                let reader = try await StreamReader.open(path: path, in: scope, reactor: reactor)
                let task = Task { try await reader.read() }
                figure.samples.append(await cancelLatency(task) { reactor.waitingDescriptorCount > 0 })
            }
        }
        return figure
    }

    static func postgresCancel(rounds: Int, conninfo: String) async throws -> [Figure] {
        var returned = Figure(name: "postgres pg_sleep cancel -> task return", samples: [])
        var idle = Figure(name: "postgres cancel request -> backend not active", samples: [])
        var fastIdle = Figure(name: "postgres fast path -> backend not active", samples: [])
        try await withResourceScope("bench.pg", registry: ResourceRegistry()) { scope in
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            let pid = connection.backendPID
            func state() async throws -> String? {
                try await observer.query("SELECT state FROM pg_stat_activity WHERE pid = $1", [Int(pid)]).first?.decode(String?.self, at: 0)
            }
            let channel = PostgresCancelChannel(control: try await PostgresConnection.connect(conninfo, in: scope))
            for fast in [false, true] {
                connection.useCancelChannel(fast ? channel : nil)
                for _ in 0..<rounds {
                    let task = Task { try await connection.execute("SELECT pg_sleep(30)") }
                    while try await state() != "active" {}
                    let start = ContinuousClock.now
                    task.cancel()
                    _ = await task.result
                    if !fast { returned.samples.append(ContinuousClock.now - start) }
                    while try await state() == "active" {}
                    if fast { fastIdle.samples.append(ContinuousClock.now - start) } else { idle.samples.append(ContinuousClock.now - start) }
                }
            }
        }
        return [returned, idle, fastIdle]
    }
}
