import DemoRuntime
import CLibPQ
import Foundation
import Glibc
import PostgresAdapter
import PostgresActivity
import ResourceKit

/// Figures 3, 4 and 7: Postgres cancellation, round trips and the pool storm, each beside raw libpq.
enum PostgresBench {
    static let sleepQuery = "SELECT pg_sleep(30)"

    /// Polls (back to back: a pause would coarsen the figure) until `pid` runs a query.
    static func waitUntilActive(_ pid: Int32, observer: PostgresConnection) async throws {
        let probe = PostgresActivityProbe(observer: observer, pollInterval: .zero)
        guard try await probe.waitUntil(.active(.pid(pid)), within: .seconds(10)) != nil else {
            throw PostgresError(.connection, "the benchmark's query never became active")
        }
    }

    /// Polls back to back until `pid` is not active (at most 10 s); returns when that was first seen.
    static func waitUntilNotActive(_ pid: Int32, observer: PostgresConnection) async throws -> ContinuousClock.Instant {
        let probe = PostgresActivityProbe(observer: observer, pollInterval: .zero)
        _ = try await probe.waitUntil(.notActive(.pid(pid)), within: .seconds(10))
        return .now
    }

    struct CancelFigures {
        var taskReturn: [Duration] = []
        var fastPathTaskReturn: [Duration] = []
        var backendStopped: [Duration] = []
        var fastPathStopped: [Duration] = []
        var rawReturn: [Duration] = []
        var rawStopped: [Duration] = []
        var polling: [Duration] = []
    }

    static func cancellation(rounds: Int, pollingRounds: Int, conninfo: String) async throws -> CancelFigures {
        var figures = CancelFigures()
        try await withResourceScope("bench.pg", registry: ResourceRegistry()) { scope in
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            let channel = PostgresCancelChannel(control: try await PostgresConnection.connect(conninfo, in: scope))
            let raw = try RawLibPQConnection(conninfo)
            guard let pid = connection.backendPID, raw.backendPID > 0 else {
                throw PostgresError(
                    .connection, "the benchmark needs a direct server connection (the backend could not be verified)")
            }
            // Interleaved round by round (cancel request, fast path, raw libpq), so that drift in the
            // server's or the machine's speed affects every figure alike.
            for _ in 0..<rounds {
                for fast in [false, true] {
                    connection.useCancelChannel(fast ? channel : nil)
                    // Owner: this round, which cancels and awaits it.
                    let task = Task { try await connection.execute(sleepQuery) }
                    try await waitUntilActive(pid, observer: observer)
                    let start = ContinuousClock.now
                    task.cancel()
                    _ = await task.result
                    let returned = ContinuousClock.now - start
                    if fast { figures.fastPathTaskReturn.append(returned) } else { figures.taskReturn.append(returned) }
                    let stopped = try await waitUntilNotActive(pid, observer: observer) - start
                    if fast { figures.fastPathStopped.append(stopped) } else { figures.backendStopped.append(stopped) }
                }
                // Raw libpq: a thread blocked in PQexec, PQcancel from another thread.
                // Owner: this round, which awaits it.
                let returned = Task {
                    await RawLibPQConnection.onThread {
                        raw.exec(sleepQuery)
                        return ContinuousClock.now
                    }
                }
                try await waitUntilActive(raw.backendPID, observer: observer)
                let start = ContinuousClock.now
                Thread { raw.cancel() }.start()
                let stopped = try await waitUntilNotActive(raw.backendPID, observer: observer)
                figures.rawStopped.append(stopped - start)
                figures.rawReturn.append(await returned.value - start)
            }
            // The polling baseline: non-blocking libpq, checking Task.isCancelled every 10 ms.
            for _ in 0..<pollingRounds {
                let polled = try RawLibPQConnection(conninfo)
                let parked = Locked(false)
                // Owner: this round, which cancels and awaits it.
                let task = Task { try pollingQuery(polled, parked: parked) }
                try await waitUntilActive(polled.backendPID, observer: observer)
                try await Task.sleep(for: .microseconds(Int64.random(in: 0..<10_000)))
                let start = ContinuousClock.now
                task.cancel()
                _ = await task.result
                figures.polling.append(.now - start)
            }
        }
        return figures
    }

    /// What users write without an adapter: send, then every 10 ms look for the result or for
    /// `Task.isCancelled` (then a blocking cancel request and a drain).
    static func pollingQuery(_ raw: RawLibPQConnection, parked: Locked<Bool>) throws {
        guard PQsendQuery(raw.conn, sleepQuery) == 1 else {
            throw RawLibPQConnection.Failure(description: "send failed")
        }
        var entry = pollfd(fd: PQsocket(raw.conn), events: Int16(POLLIN), revents: 0)
        while true {
            parked.withLock { $0 = true }
            _ = poll(&entry, 1, 10)
            _ = PQconsumeInput(raw.conn)
            if PQisBusy(raw.conn) == 0 { break }
            if Task.isCancelled {
                raw.cancel()
                break
            }
        }
        while let result = PQgetResult(raw.conn) { PQclear(result) }
        if Task.isCancelled { throw CancellationError() }
    }

    /// One round-trip figure: queries per second and this process's CPU per query, ours beside raw libpq's.
    struct RoundTrip {
        var ours: Samples
        var raw: Samples
        var oursCPU: Samples
        var rawCPU: Samples
    }

    /// Queries per second and CPU microseconds per query for `SELECT 1` and `SELECT $1::int`, ours and raw
    /// libpq's, in `batches` batches. The CPU is the whole process's (user + system, `getrusage`) while one side
    /// runs and the other waits, so ours includes the look-again before parking and the reactor thread.
    static func roundTrips(queries: Int, batches: Int, conninfo: String) async throws -> [RoundTrip] {
        var results: [RoundTrip] = []
        try await withResourceScope("bench.roundtrip", registry: ResourceRegistry()) { scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            let raw = try RawLibPQConnection(conninfo)
            for parameterised in [false, true] {
                let label = parameterised ? "SELECT $1::int" : "SELECT 1"
                let rawLabel = "raw libpq \(parameterised ? "PQexecParams" : "PQexec") loop"
                var figure = RoundTrip(
                    ours: Samples("round trip \(label)", unit: "qps"), raw: Samples(rawLabel, unit: "qps"),
                    oursCPU: Samples("CPU per query, round trip \(label)", unit: "us"),
                    rawCPU: Samples("CPU per query, \(rawLabel)", unit: "us"))
                // Batches interleaved (ours, then raw libpq's), so that drift affects both alike.
                for _ in 0..<batches {
                    let (qps, cpu) = try await BulkBench.measure(queries: queries) {
                        for index in 0..<queries {
                            if parameterised {
                                _ = try await connection.query("SELECT $1::int", [index])
                            } else {
                                _ = try await connection.query("SELECT 1")
                            }
                        }
                    }
                    figure.ours.values.append(qps)
                    figure.oursCPU.values.append(cpu)
                    let (rawQPS, rawCPU) = try await BulkBench.measure(queries: queries) {
                        await RawLibPQConnection.onThread {
                            for index in 0..<queries {
                                if parameterised {
                                    raw.exec("SELECT $1::int", String(index))
                                } else {
                                    raw.exec("SELECT 1")
                                }
                            }
                        }
                    }
                    figure.raw.values.append(rawQPS)
                    figure.rawCPU.values.append(rawCPU)
                }
                results.append(figure)
            }
        }
        return results
    }

    struct StormResult {
        var quiet: [Duration] = []
        var returned: [Duration] = []
        var healthy = 0
    }

    /// 1,000 queued queries over a pool of 16, all cancelled at once: until the server shows none active.
    static func poolStorm(rounds: Int, queries: Int, poolSize: Int, conninfo: String) async throws -> StormResult {
        var result = StormResult()
        let pool = try PostgresPool(conninfo: conninfo, maxConnections: poolSize)
        try await withResourceScope("bench.storm", registry: ResourceRegistry()) { scope in
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            for round in 0..<rounds {
                let marker = "rk-storm-\(getpid())-\(round)"
                let probe = PostgresActivityProbe(observer: observer, pollInterval: .zero)
                func active() async throws -> Int { try await probe.backends(.running(marker)).count }
                // Owner: this round, which cancels and awaits it.
                let storm = Task {
                    await withTaskGroup(of: Void.self) { group in
                        for _ in 0..<queries {
                            // Every one is cancelled: the cancellation is what is timed.
                            group.addTask {
                                _ = try? await pool.withConnection {
                                    try await $0.execute("SELECT pg_sleep(30) /* \(marker) */")
                                }
                            }
                        }
                    }
                }
                while try await active() < poolSize || pool.waiterCount < queries - poolSize {}
                let start = ContinuousClock.now
                storm.cancel()
                while try await active() > 0 {}
                result.quiet.append(.now - start)
                await storm.value
                result.returned.append(.now - start)
            }
            // Every connection is healthy afterwards: poolSize concurrent SELECT 1.
            result.healthy = await withTaskGroup(of: Bool.self) { group in
                for _ in 0..<poolSize {
                    group.addTask {
                        (try? await pool.withConnection { try await $0.query("SELECT 1").count == 1 }) ?? false
                    }
                }
                return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
        }
        await pool.shutdown()
        return result
    }
}
