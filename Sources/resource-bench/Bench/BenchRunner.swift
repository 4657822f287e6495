import DemoRuntime
import DemoCommandLine
import Foundation
import PostgresAdapter
import ResourceKit

/// `resource-demo bench [--quick] [--core] [--json] [--postgres URL] [--report FILE.svg]`: every figure beside its
/// references, measured in the same run, with the ratio and the target. Build with `-c release` for meaningful figures;
/// `--quick` is a smoke run (under a minute) with fewer repetitions.
enum Bench {
    static func run(quick: Bool, core: Bool = false, json: Bool, postgres: String?, report: String? = nil) async throws
    {
        if let report, !report.hasSuffix(".svg") {
            throw UsageError("--report writes an SVG picture: give it a FILE.svg path")
        }
        let (rows, lines) = try await measure(quick: quick, core: core, json: json, postgres: postgres)
        if json {
            for row in rows { Console.line(row.json.text) }
        } else {
            printTable(rows)
        }
        for line in lines { Console.line(line) }
        if let report {
            let picture = BenchReport.svg(
                rows,
                title:
                    """
                    resource-demo bench\(quick ? " --quick" : ""): cancel-to-return and overhead, beside their \
                    references
                    """
            )
            do {
                try picture.write(toFile: report, atomically: true, encoding: .utf8)
            } catch {
                throw UsageError("could not write the report to \(report)")
            }
            Console.line("report: \(report)")
        }
    }

    /// Every figure beside its references, measured now: the rows, and the lines that are not rows (the stream's
    /// memory, in `json` form or as text).
    static func measure(quick: Bool, core: Bool, json: Bool, postgres: String?) async throws -> (
        rows: [BenchRow], lines: [String]
    ) {
        let rounds = quick ? 20 : 300
        let pollingRounds = quick ? 5 : 40
        let progress = BenchProgress(total: core ? 7 : 11 + (quick ? 0 : 1))
        var rows: [BenchRow] = []
        var lines: [String] = []

        progress.step("raw limit")
        let raw = await ReadCancelBench.rawLimit(rounds: rounds)
        for (index, measure) in [ReadCancelBench.socket, ReadCancelBench.fifo].enumerated() {
            progress.step(index == 0 ? "socket read cancel" : "FIFO read cancel")
            let samples = try await measure(rounds, pollingRounds)
            rows.append(BenchRow(figure: samples[0], reference: samples[2], target: .ratioAtMost(1.5)))
            rows.append(BenchRow(figure: samples[0], reference: raw, target: .ratioAtMost(2)))
            rows.append(
                BenchRow(
                    figure: samples[0], reference: samples[1], target: .ratioAtMost(0.01),
                    note: "at least 100x faster than polling"))
            if index == 0 {
                progress.step("the conformance kit's figure for the socket read")
                let kit = try await ReadCancelBench.kitFigure(runs: quick ? 5 : 30)
                rows.append(
                    BenchRow(
                        figure: kit, reference: samples[0], target: .ratioAtMost(2),
                        note: "the kit times inside the operation's task: no hop of its own"))
            }
        }

        progress.step("scope overhead")
        let scope = try await ScopeBench.run(operations: 500, rounds: quick ? 24 : 200)
        rows.append(
            BenchRow(
                figure: scope.scope, reference: scope.bare, target: .ratioAtMost(5),
                pairedRatios: scope.scopeOverBare))
        rows.append(
            BenchRow(
                figure: scope.scope, reference: scope.plain, target: nil,
                note: "against the plain mechanics alone: what the bookkeeping (ids, phases, counters, leaks) costs",
                pairedRatios: scope.scopeOverPlain))
        rows.append(
            BenchRow(
                figure: scope.scopeWithSink, reference: scope.scope, target: nil,
                note: "the same with a counting event sink, against the default (no sink)",
                pairedRatios: scope.sinkOverScope))

        progress.step("10,000 blocked reads cancelled at once")
        let scale = try await ScaleBench.run(count: quick ? 2_000 : 10_000)
        rows.append(
            BenchRow(
                figure: Samples(
                    "\(scale.count) blocked socket reads: cancel -> last return", durations: [scale.lastReturned],
                    unit: "ms"),
                reference: nil, target: .atMost(100),
                note:
                    """
                    \(scale.bytesPerResource) bytes resident per live socket resource; descriptors \
                    \(scale.fdsBefore) before, \(scale.fdsAfter) after
                    """
            ))

        // One throwaway cluster (unless --postgres or DATABASE_URL names a server) for every Postgres figure.
        if core {
            progress.step("done")
        } else {
            try await PostgresTarget.with(postgres, quiet: true) { conninfo in
                progress.step("Postgres cancel (ours, fast path, raw libpq, polling)")
                let cancel = try await PostgresBench.cancellation(
                    rounds: quick ? 10 : 50, pollingRounds: quick ? 3 : 20, conninfo: conninfo)
                let rawReturn = Samples(
                    "raw libpq: PQcancel from another thread -> PQexec returns", durations: cancel.rawReturn)
                let rawStopped = Samples("raw libpq: PQcancel -> backend not active", durations: cancel.rawStopped)
                rows.append(
                    BenchRow(
                        figure: Samples("postgres pg_sleep: cancel -> task return", durations: cancel.taskReturn),
                        reference: rawReturn, target: .ratioAtMost(0.5)))
                rows.append(
                    BenchRow(
                        figure: Samples("postgres pg_sleep: cancel -> task return", durations: cancel.taskReturn),
                        reference: Samples(
                            "polling loop (Task.isCancelled every 10 ms, then PQcancel)", durations: cancel.polling),
                        target: nil))
                rows.append(
                    BenchRow(
                        figure: Samples(
                            "postgres pg_sleep, fast path: cancel -> task return",
                            durations: cancel.fastPathTaskReturn),
                        reference: Samples("postgres pg_sleep: cancel -> task return", durations: cancel.taskReturn),
                        target: nil))
                rows.append(
                    BenchRow(
                        figure: Samples(
                            "postgres cancel request -> backend not active", durations: cancel.backendStopped),
                        reference: rawStopped, target: .ratioAtMost(1.1)))
                rows.append(
                    BenchRow(
                        figure: Samples("postgres fast path -> backend not active", durations: cancel.fastPathStopped),
                        reference: rawStopped, target: .ratioAtMost(0.5)))

                progress.step("round trips")
                for pair in try await PostgresBench.roundTrips(
                    queries: quick ? 200 : 2_000, batches: quick ? 3 : 10, conninfo: conninfo)
                {
                    rows.append(BenchRow(figure: pair.ours, reference: pair.raw, target: .ratioAtLeast(0.95)))
                    // No round trip bought by burning a core that a loaded server needs (issue #23).
                    rows.append(BenchRow(figure: pair.oursCPU, reference: pair.rawCPU, target: .ratioAtMost(1.5)))
                }

                progress.step("concurrency, COPY and pipelines")
                // The sweep: 16, 64 and 256 tasks over the same pool of 16 (and 64 and 256 that prefer the reactor
                // as their executor), each beside the same threads; the gated 64-task rows in rounds of their own.
                let (sweep, resetPrice) = try await BulkBench.concurrency(
                    queries: quick ? 6_400 : 64_000, batches: quick ? 2 : 5, resetPairs: quick ? 16 : 20,
                    pairedRounds: quick ? 16 : 20, pairedQueries: quick ? 6_400 : 12_800, conninfo: conninfo)
                for concurrency in sweep {
                    rows.append(
                        BenchRow(
                            figure: concurrency.oursQPS, reference: concurrency.rawQPS, target: .ratioAtLeast(1.0),
                            pairedRatios: concurrency.qpsRatios))
                    rows.append(
                        BenchRow(
                            figure: concurrency.oursCPU, reference: concurrency.rawCPU, target: .ratioAtMost(1.5),
                            pairedRatios: concurrency.cpuRatios))
                }
                // The carried session reset's price: the leased row beside the same row over a pool that resets
                // nothing, in pairs of loads back to back, judged by the pairs' ratios.
                if let price = resetPrice {
                    rows.append(
                        BenchRow(
                            figure: price.resettingQPS, reference: price.resetlessQPS, target: .ratioAtLeast(0.95),
                            pairedRatios: price.qpsRatios))
                    rows.append(
                        BenchRow(
                            figure: price.resettingCPU, reference: price.resetlessCPU, target: .ratioAtMost(1.05),
                            pairedRatios: price.cpuRatios))
                }
                let copy = try await BulkBench.copy(
                    rows: quick ? 100_000 : 1_000_000, rounds: quick ? 1 : 3, conninfo: conninfo)
                rows.append(BenchRow(figure: copy.outOurs, reference: copy.outPsql, target: .ratioAtLeast(0.8)))
                rows.append(BenchRow(figure: copy.inOurs, reference: copy.inPsql, target: .ratioAtLeast(0.8)))
                let pipeline = try await BulkBench.pipeline(
                    statements: 1_000, rounds: quick ? 9 : 20, conninfo: conninfo)
                rows.append(
                    BenchRow(
                        figure: pipeline.pipeline, reference: pipeline.sequential, target: .ratioAtLeast(5),
                        pairedRatios: pipeline.ratios))

                progress.step("pool storm")
                let storm = try await PostgresBench.poolStorm(
                    rounds: quick ? 1 : 5, queries: 1_000, poolSize: 16, conninfo: conninfo)
                rows.append(
                    BenchRow(
                        figure: Samples(
                            "pool storm: 1000 queued over 16, cancelled -> server quiet", durations: storm.quiet,
                            unit: "ms"),
                        reference: nil, target: .atMost(100),
                        note:
                            """
                            all tasks returned after \(Samples("", durations: storm.returned, unit: "ms").median) \
                            ms; \(storm.healthy)/16 connections healthy afterwards
                            """
                    ))

                if !quick {
                    progress.step("10M-row stream memory")
                    let streamRows = Int(ProcessInfo.processInfo.environment["BENCH_STREAM_ROWS"] ?? "") ?? 10_000_000
                    let (count, growth, seconds) = try await StreamMemoryBench.streamMemory(
                        rows: streamRows, conninfo: conninfo)
                    lines.append(
                        json
                            ? JSONLine([
                                "figure": .string("stream rows: resident memory growth after the first 100k"),
                                "unit": .string("KiB"),
                                "median": .int(Int64(growth)), "rows": .int(Int64(count)), "seconds": .double(seconds),
                            ]).text
                            : """
                            stream \(count) rows (single-row mode): resident memory grew \(growth) KiB after the \
                            first 100,000 rows, in \(seconds) s
                            """
                    )
                }
                progress.step("done")
            }
        }
        progress.finish()
        return (rows, lines)
    }

    static func printTable(_ rows: [BenchRow]) {
        func number(_ value: Double) -> String {
            value.isFinite ? String(format: value >= 100 ? "%.0f" : "%.1f", value) : "-"
        }
        let header = ["figure", "unit", "median", "p90", "p99", "reference", "ref median", "ratio", "target", "met"]
        let cells: [[String]] = rows.map { row in
            [
                row.figure.name, row.figure.unit, number(row.figure.median), number(row.figure.quantile(0.9)),
                number(row.figure.quantile(0.99)),
                row.reference?.name ?? "-", row.reference.map { number($0.median) } ?? "-",
                row.ratio.map { String(format: "%.3f", $0) } ?? "-",
                row.target?.text ?? "-", row.met.map { $0 ? "yes" : "NO" } ?? "-",
            ]
        }
        for line in TextTable.lines(header: header, rows: cells) { Console.line(line) }
        for row in rows { if let note = row.note { Console.line("  \(row.figure.name): \(note)") } }
    }
}
