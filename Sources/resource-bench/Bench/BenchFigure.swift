import DemoCommandLine
import Foundation
import Glibc

/// The CPU time this process has used so far, in seconds: every thread, user and system
/// (`CLOCK_PROCESS_CPUTIME_ID`, to the nanosecond).
func processCPUSeconds() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

/// Samples of one quantity, with quantiles.
struct Samples: Sendable {
    let name: String
    /// `us`, `ns`, `ms`, `qps`, `KiB`, ...
    let unit: String
    var values: [Double]

    init(_ name: String, unit: String, values: [Double] = []) {
        self.name = name
        self.unit = unit
        self.values = values
    }

    init(_ name: String, durations: [Duration], unit: String = "us") {
        self.init(name, unit: unit, values: durations.map { Samples.convert($0, to: unit) })
    }

    static func convert(_ duration: Duration, to unit: String) -> Double {
        let (seconds, attoseconds) = duration.components
        let nanoseconds = Double(seconds) * 1e9 + Double(attoseconds) / 1e9
        switch unit {
        case "ns": return nanoseconds
        case "ms": return nanoseconds / 1e6
        default: return nanoseconds / 1e3
        }
    }

    func quantile(_ q: Double) -> Double {
        guard !values.isEmpty else { return .nan }
        let sorted = values.sorted()
        return sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * q).rounded()))]
    }

    var median: Double { quantile(0.5) }
}

/// Runs `rounds` rounds of `sides` measurements back to back, round `r` starting with side `r % sides`, so that the
/// sides of a round are timed moments apart and no side always runs first. Returns each round's figures in side
/// order: the rounds that ``BenchRow/pairedRatios`` is made of.
func rotatingRounds<Figure>(
    _ rounds: Int, sides: Int, _ measure: (_ side: Int) async throws -> Figure
) async rethrows -> [[Figure]] {
    var results: [[Figure]] = []
    for round in 0..<rounds {
        var measured: [(side: Int, figure: Figure)] = []
        for step in 0..<sides {
            let side = (round + step) % sides
            measured.append((side, try await measure(side)))
        }
        results.append(measured.sorted { $0.side < $1.side }.map(\.figure))
    }
    return results
}

/// What a figure must show against its reference.
enum Target: Sendable {
    /// figure median / reference median ≤ ratio (lower is better).
    case ratioAtMost(Double)
    /// figure median / reference median ≥ ratio (higher is better, e.g. queries per second).
    case ratioAtLeast(Double)
    /// figure median ≤ value, in the figure's unit.
    case atMost(Double)

    var text: String {
        switch self {
        case .ratioAtMost(let ratio): return "ratio <= \(ratio)"
        case .ratioAtLeast(let ratio): return "ratio >= \(ratio)"
        case .atMost(let value): return "<= \(value)"
        }
    }
}

/// One row of the result: a figure beside one reference, the ratio and the target.
struct BenchRow: Sendable {
    let figure: Samples
    let reference: Samples?
    let target: Target?
    var note: String?
    /// The figure over its reference in each round where the two were measured side by side
    /// (``rotatingRounds(_:sides:_:)``); `nil` where the two sides were measured apart. When present, the row's ratio
    /// is their median, so that a machine whose speed drifts during the run (a busy neighbour, a shared core) moves
    /// both sides of each ratio.
    var pairedRatios: [Double]?

    init(figure: Samples, reference: Samples?, target: Target?, note: String? = nil, pairedRatios: [Double]? = nil) {
        self.figure = figure
        self.reference = reference
        self.target = target
        self.note = note
        self.pairedRatios = pairedRatios
    }

    var ratio: Double? {
        if let pairedRatios, !pairedRatios.isEmpty {
            return Samples("ratio", unit: "x", values: pairedRatios).median
        }
        guard let reference, reference.median > 0 else { return nil }
        return figure.median / reference.median
    }

    var met: Bool? {
        switch target {
        case nil: return nil
        case .ratioAtMost(let limit)?: return ratio.map { $0 <= limit }
        case .ratioAtLeast(let limit)?: return ratio.map { $0 >= limit }
        case .atMost(let limit)?: return figure.median <= limit
        }
    }

    var json: JSONLine {
        var line = JSONLine()
        line.set("figure", .string(figure.name))
        line.set("unit", .string(figure.unit))
        line.set("median", .double(round(figure.median)))
        line.set("p90", .double(round(figure.quantile(0.9))))
        line.set("p99", .double(round(figure.quantile(0.99))))
        line.set("samples", .int(Int64(figure.values.count)))
        line.set("reference", reference.map { .string($0.name) } ?? .null)
        line.set("reference_median", reference.map { .double(round($0.median)) } ?? .null)
        line.set("ratio", ratio.map { .double(round($0 * 1000) / 1000) } ?? .null)
        line.set("target", target.map { .string($0.text) } ?? .null)
        line.set("met", met.map { .bool($0) } ?? .null)
        if let note { line.set("note", .string(note)) }
        return line
    }

    private func round(_ value: Double) -> Double {
        value.isFinite ? (value * 10).rounded() / 10 : value
    }
}

/// A progress bar on stderr (a line per step when stderr is not a terminal).
final class BenchProgress {
    private let total: Int
    private var done = 0

    init(total: Int) { self.total = total }

    func step(_ name: String) {
        done += 1
        let width = 24
        let filled = width * done / max(total, 1)
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
        if isatty(2) == 1 {
            FileHandle.standardError.write(Data("\r\u{1B}[2Kbench [\(bar)] \(done)/\(total) \(name)".utf8))
        } else {
            FileHandle.standardError.write(Data("bench \(done)/\(total): \(name)\n".utf8))
        }
    }

    func finish() {
        if isatty(2) == 1 { FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8)) }
    }
}
