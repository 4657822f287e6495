import Foundation

/// `bench --report FILE.svg`: each latency figure's distribution beside its references, on one log-scale time
/// axis. Self-contained SVG (no scripts, no external fonts or images), readable in any browser.
///
/// Each series is one row: its samples as dots, a box from the 25th to the 75th percentile, whiskers to the
/// 10th and 90th, a bold tick at the median, and the median written at the right. A figure's row comes first,
/// its references below it in grey.
enum BenchReport {
    struct Series {
        let label: String
        /// Samples in seconds.
        let seconds: [Double]
        let isReference: Bool
    }

    struct Group {
        let title: String
        var series: [Series]
    }

    /// The latency groups of `rows` (figures in ns, µs or ms; throughput rows are left out).
    static func groups(_ rows: [BenchRow]) -> [Group] {
        var groups: [Group] = []
        for row in rows {
            guard let figure = seconds(row.figure) else { continue }
            if let index = groups.firstIndex(where: { $0.title == row.figure.name }) {
                if let reference = row.reference, let values = seconds(reference),
                    !groups[index].series.contains(where: { $0.label == reference.name })
                {
                    groups[index].series.append(Series(label: reference.name, seconds: values, isReference: true))
                }
                continue
            }
            var group = Group(
                title: row.figure.name, series: [Series(label: "ResourceKit", seconds: figure, isReference: false)])
            if let reference = row.reference, let values = seconds(reference) {
                group.series.append(Series(label: reference.name, seconds: values, isReference: true))
            }
            groups.append(group)
        }
        return groups
    }

    static func seconds(_ samples: Samples) -> [Double]? {
        let scale: Double
        switch samples.unit {
        case "ns": scale = 1e-9
        case "us": scale = 1e-6
        case "ms": scale = 1e-3
        default: return nil
        }
        let values = samples.values.filter { $0.isFinite && $0 > 0 }.map { $0 * scale }
        return values.isEmpty ? nil : values
    }

    static func svg(_ rows: [BenchRow], title: String) -> String {
        let groups = groups(rows)
        let all = groups.flatMap { $0.series.flatMap(\.seconds) }
        let low = floor(log10(all.min() ?? 1e-7))
        let high = ceil(log10(all.max() ?? 1))
        let (left, right, width) = (330.0, 90.0, 1100.0)
        let plotWidth = width - left - right
        func x(_ value: Double) -> Double { left + (log10(value) - low) / max(high - low, 1) * plotWidth }
        let rowHeight = 22.0
        let groupGap = 30.0
        let top = 70.0
        var y = top
        var body = ""
        for group in groups {
            body += text(12, y - 6, escape(group.title), weight: "bold")
            for series in group.series {
                let sorted = series.seconds.sorted()
                func q(_ p: Double) -> Double {
                    sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))]
                }
                let color = series.isReference ? "#8a8a8a" : "#1f6fb2"
                let mid = y + rowHeight / 2
                body += text(24, mid + 4, escape(series.label), size: 11, fill: series.isReference ? "#555" : "#111")
                for (index, value) in sorted.enumerated() {
                    let jitter = Double((index * 7919) % 11) - 5
                    body +=
                        """
                        <circle cx=\"\(f(x(value)))\" cy=\"\(f(mid + jitter * 0.8))\" r=\"1.6\" fill=\"\(color)\" \
                        fill-opacity=\"0.35\"/>\n
                        """
                }
                body +=
                    """
                    <line x1=\"\(f(x(q(0.1))))\" y1=\"\(f(mid))\" x2=\"\(f(x(q(0.9))))\" y2=\"\(f(mid))\" \
                    stroke=\"\(color)\" stroke-width=\"1\"/>\n
                    """
                body +=
                    """
                    <rect x=\"\(f(x(q(0.25))))\" y=\"\(f(mid - 6))\" \
                    width=\"\(f(max(x(q(0.75)) - x(q(0.25)), 1)))\" height=\"12\" fill=\"none\" \
                    stroke=\"\(color)\" stroke-width=\"1.2\"/>\n
                    """
                body +=
                    """
                    <line x1=\"\(f(x(q(0.5))))\" y1=\"\(f(mid - 8))\" x2=\"\(f(x(q(0.5))))\" y2=\"\(f(mid + 8))\" \
                    stroke=\"\(color)\" stroke-width=\"2.5\"/>\n
                    """
                body += text(width - right + 8, mid + 4, duration(q(0.5)), size: 11, fill: color)
                y += rowHeight
            }
            y += groupGap
        }
        let bottom = y
        var axis = ""
        var decade = low
        while decade <= high {
            let position = x(pow(10, decade))
            axis +=
                """
                <line x1=\"\(f(position))\" y1=\"\(f(top - 20))\" x2=\"\(f(position))\" \
                y2=\"\(f(bottom - groupGap))\" stroke=\"#ddd\"/>\n
                """
            axis += text(position - 18, bottom - groupGap + 16, decadeLabel(Int(decade)), size: 11, fill: "#444")
            decade += 1
        }
        let height = bottom + 10
        return """
            <?xml version="1.0" encoding="UTF-8"?>
            <svg xmlns="http://www.w3.org/2000/svg" width="\(f(width))" height="\(f(height))" \
            viewBox="0 0 \(f(width)) \(f(height))" font-family="sans-serif">
            <rect width="100%" height="100%" fill="white"/>
            \(text(12, 24, escape(title), size: 16, weight: "bold"))
            \(text(12, 44, """
                Each row: samples (dots), 25th-75th percentile (box), 10th-90th (whiskers), median (bar, value at \
                right). Log-scale time axis.
                """, size: 11, fill: "#444"))
            \(axis)\(body)</svg>

            """
    }

    private static func text(
        _ x: Double, _ y: Double, _ content: String, size: Int = 13, weight: String = "normal", fill: String = "#111"
    ) -> String {
        """
        <text x=\"\(f(x))\" y=\"\(f(y))\" font-size=\"\(size)\" font-weight=\"\(weight)\" \
        fill=\"\(fill)\">\(content)</text>\n
        """
    }

    private static func f(_ value: Double) -> String { String(format: "%.1f", value) }

    static func duration(_ seconds: Double) -> String {
        switch seconds {
        case ..<1e-6: return String(format: "%.0f ns", seconds * 1e9)
        case ..<1e-3: return String(format: seconds < 1e-5 ? "%.1f µs" : "%.0f µs", seconds * 1e6)
        case ..<1: return String(format: seconds < 1e-2 ? "%.2f ms" : "%.0f ms", seconds * 1e3)
        default: return String(format: "%.1f s", seconds)
        }
    }

    /// `100 ns`, `1 µs`, `10 µs`, ... for the decade 10^exponent seconds.
    static func decadeLabel(_ exponent: Int) -> String {
        let units = [(-9, "ns"), (-6, "µs"), (-3, "ms"), (0, "s")]
        let (base, unit) = units.last { $0.0 <= exponent } ?? units[0]
        let value = (0..<max(exponent - base, 0)).reduce(1) { value, _ in value * 10 }
        return "\(value) \(unit)"
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}
