import DemoCommandLine
import DemoRuntime
import Foundation

/// `resource-bench --check THRESHOLDS.json`: measures the bench's rows and compares the ratios the thresholds file
/// names against its bounds. Exits 1 when a ratio is past its bound (a regression) or a named row was not measured
/// (the bench changed: update the file), 0 otherwise.
///
/// Bounds are on ratios against references measured in the same run (the raw limit, raw libpq, the bare
/// handler), so a slower or noisier machine moves both sides; each bound is the recorded ratio with a stated
/// tolerance (`Benchmarks/README.md`).
enum BenchCheck {
    struct Thresholds: Decodable {
        /// `quick` (the smoke run's repetitions) or `full`.
        let mode: String
        /// Only the core's rows (no Postgres).
        let core: Bool
        let tolerance: String
        let rows: [Bound]
    }

    struct Bound: Decodable {
        let figure: String
        let reference: String
        /// The ratio in the results file the bound was set from.
        let recorded: Double
        let atMost: Double?
        let atLeast: Double?
        /// Why this row is stable enough to gate on.
        let why: String
    }

    /// The outcome of one bound.
    struct Verdict {
        let bound: Bound
        let ratio: Double?

        var passed: Bool {
            guard let ratio else { return false }
            if let limit = bound.atMost, ratio > limit { return false }
            if let limit = bound.atLeast, ratio < limit { return false }
            return true
        }
    }

    static func load(_ path: String) throws -> Thresholds {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw UsageError("--check: cannot read \(path)")
        }
        let thresholds: Thresholds
        do {
            thresholds = try JSONDecoder().decode(Thresholds.self, from: data)
        } catch {
            throw UsageError("--check: \(path) is not a thresholds file (\(error))")
        }
        guard ["quick", "full"].contains(thresholds.mode) else {
            throw UsageError("--check: \(path): mode is \"quick\" or \"full\", not \"\(thresholds.mode)\"")
        }
        for bound in thresholds.rows where bound.atMost == nil && bound.atLeast == nil {
            throw UsageError("--check: \(path): the row \"\(bound.figure)\" has neither atMost nor atLeast")
        }
        return thresholds
    }

    /// The verdicts of `thresholds` against `rows` (pure: tested without a bench run).
    static func verdicts(_ thresholds: Thresholds, _ rows: [BenchRow]) -> [Verdict] {
        thresholds.rows.map { bound in
            let row = rows.first { $0.figure.name == bound.figure && $0.reference?.name == bound.reference }
            return Verdict(bound: bound, ratio: row?.ratio)
        }
    }

    static func run(_ path: String, postgres: String?) async throws -> Int32 {
        let thresholds = try load(path)
        let (rows, _) = try await Bench.measure(
            quick: thresholds.mode == "quick", core: thresholds.core, json: false, postgres: postgres)
        let verdicts = verdicts(thresholds, rows)
        let header = ["figure", "reference", "ratio", "bound", "recorded", "verdict"]
        let cells: [[String]] = verdicts.map { verdict in
            let bound =
                verdict.bound.atMost.map { "<= \($0)" } ?? verdict.bound.atLeast.map { ">= \($0)" } ?? "-"
            return [
                verdict.bound.figure, verdict.bound.reference,
                verdict.ratio.map { String(format: "%.3f", $0) } ?? "not measured", bound,
                String(verdict.bound.recorded), verdict.passed ? "ok" : "REGRESSED",
            ]
        }
        for line in TextTable.lines(header: header, rows: cells) { Console.line(line) }
        let failed = verdicts.filter { !$0.passed }
        Console.line(
            failed.isEmpty
                ? "check: \(verdicts.count) of \(verdicts.count) rows within their bounds (\(path))"
                : "check: \(failed.count) of \(verdicts.count) rows past their bounds (\(path))")
        return failed.isEmpty ? 0 : 1
    }
}
