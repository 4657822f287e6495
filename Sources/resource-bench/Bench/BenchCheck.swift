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
///
/// A row past its bound in the first run is not yet a regression: one disturbed run on a shared machine (a
/// reference sample that came out fast, a neighbour's burst) can put any row past its bound. The bench then runs
/// twice more, and every row is judged by the median of its three ratios: a real regression is past its bound in
/// most runs and still fails; a single disturbed run does not.
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
        /// The median ratio of quiet quick runs that the bound was set from.
        let recorded: Double
        /// The median ratio of quick runs beside two busy loops (`nil`: not measured so).
        let busy: Double?
        /// The row's goal (the bench's target), where it has one.
        let goal: Double?
        let atMost: Double?
        let atLeast: Double?
        /// Why this row is stable enough to gate on.
        let why: String
    }

    /// The outcome of one bound over one or more runs of the bench.
    struct Verdict {
        let bound: Bound
        /// The row's ratio in each run, in run order; `nil` where a run did not measure it.
        let ratios: [Double?]

        /// The median of the runs' ratios; `nil` when a run did not measure the row (the bench changed).
        var ratio: Double? {
            let measured = ratios.compactMap { $0 }
            guard !measured.isEmpty, measured.count == ratios.count else { return nil }
            return measured.sorted()[measured.count / 2]
        }

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
        for bound in thresholds.rows where !followsTheRule(bound) {
            throw UsageError(
                "--check: \(path): the row \"\(bound.figure)\" against \"\(bound.reference)\" is bound looser "
                    + "than its goal and \(allowedDrift)x its recorded figures allow (\(loosestAllowed(bound)))")
        }
        return thresholds
    }

    /// How far a bound may sit from the worse of a row's recorded figures when the row misses its goal.
    static let allowedDrift = 1.25

    /// The loosest bound the rule allows (Benchmarks/README.md, "The gate"): the row's goal or `allowedDrift` times
    /// the worse of its quiet and busy figures, whichever is looser. A row that meets its goal with that margin is
    /// bound at the goal; any other row is held near what it measured.
    static func loosestAllowed(_ bound: Bound) -> Double {
        let busy = bound.busy ?? bound.recorded
        if bound.atMost != nil {
            return max(bound.goal ?? 0, allowedDrift * max(bound.recorded, busy))
        }
        return min(bound.goal ?? .infinity, min(bound.recorded, busy) / allowedDrift)
    }

    /// Whether a row's bound is no looser than ``loosestAllowed(_:)`` (to the file's two decimals).
    static func followsTheRule(_ bound: Bound) -> Bool {
        let limit = loosestAllowed(bound)
        let slack = 0.005
        if let atMost = bound.atMost, atMost > limit + slack { return false }
        if let atLeast = bound.atLeast, atLeast < limit - slack { return false }
        return true
    }

    /// The verdicts of `thresholds` against the rows of one or more runs, each row judged by the median of its
    /// ratios (pure: `BenchCheckTests` runs it without a bench).
    static func verdicts(_ thresholds: Thresholds, _ runs: [[BenchRow]]) -> [Verdict] {
        thresholds.rows.map { bound in
            let ratios = runs.map { rows in
                rows.first { $0.figure.name == bound.figure && $0.reference?.name == bound.reference }?.ratio
            }
            return Verdict(bound: bound, ratios: ratios)
        }
    }

    /// How many runs judge a row that the first run found past its bound.
    static let confirmingRuns = 3

    static func run(_ path: String, postgres: String?) async throws -> Int32 {
        let thresholds = try load(path)
        func measure() async throws -> [BenchRow] {
            try await Bench.measure(
                quick: thresholds.mode == "quick", core: thresholds.core, json: false, postgres: postgres
            ).rows
        }
        var runs = [try await measure()]
        var verdicts = Self.verdicts(thresholds, runs)
        let suspects = verdicts.filter { !$0.passed }.count
        if suspects > 0 {
            Console.line(
                "check: \(suspects) of \(verdicts.count) rows past their bounds in one run; running the bench "
                    + "\(confirmingRuns - 1) more times, each row judged by the median of \(confirmingRuns) runs")
            for _ in 1..<confirmingRuns { runs.append(try await measure()) }
            verdicts = Self.verdicts(thresholds, runs)
        }
        let header = ["figure", "reference", "ratio", "bound", "recorded", "verdict"]
        let cells: [[String]] = verdicts.map { verdict in
            let bound =
                verdict.bound.atMost.map { "<= \($0)" } ?? verdict.bound.atLeast.map { ">= \($0)" } ?? "-"
            return [
                verdict.bound.figure, verdict.bound.reference,
                ratioCell(verdict), bound,
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

    /// The ratio, and each run's when several runs judged it: `1.2 (1.2, 4.6, 1.1)`.
    static func ratioCell(_ verdict: Verdict) -> String {
        guard let ratio = verdict.ratio else { return "not measured" }
        let median = String(format: "%.3f", ratio)
        guard verdict.ratios.count > 1 else { return median }
        let each = verdict.ratios.map { $0.map { String(format: "%.3f", $0) } ?? "-" }
        return "\(median) (\(each.joined(separator: ", ")))"
    }
}
