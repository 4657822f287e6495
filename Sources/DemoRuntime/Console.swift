import Glibc
import ResourceKit
import ResourceKitIO

/// Output for humans (stdout, stderr) and for programs (`--json`: one JSON object per line).
package enum Console {
    /// The running program's name (`resource-demo`, `resource-bench`), for messages.
    package static let program: String = {
        let path = CommandLine.arguments.first ?? "resource-demo"
        return path.split(separator: "/").last.map(String.init) ?? path
    }()

    /// Writes a line to stdout and flushes it, so a reading process sees it at once.
    package static func line(_ text: String) {
        write(1, text + "\n")
    }

    /// Writes a line to stderr.
    package static func error(_ text: String) {
        write(2, text + "\n")
    }

    /// Rewrites the current terminal line (a live status); a no-op unless stdout is a terminal.
    package static func status(_ text: String) {
        guard isatty(1) == 1 else { return }
        write(1, "\r\u{1B}[2K" + text)
    }

    /// Ends a live status line.
    package static func endStatus() {
        guard isatty(1) == 1 else { return }
        write(1, "\r\u{1B}[2K")
    }

    private static func write(_ fd: Int32, _ text: String) {
        var text = text
        text.withUTF8 { buffer in
            var offset = 0
            while offset < buffer.count {
                guard
                    let written = try? Syscall.value(
                        "write", { Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset) })
                else {
                    return
                }
                offset += written
            }
        }
    }
}

extension Duration {
    /// Whole microseconds.
    package var microseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000 + attoseconds / 1_000_000_000_000
    }

    /// Milliseconds with two decimals, for humans.
    package var millisecondsText: String {
        let hundredths = microseconds / 10
        let fraction = hundredths % 100
        return "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction) ms"
    }
}

/// A live status line ("label… 1.2 s") on a terminal while some work runs.
package enum LiveStatus {
    /// Runs `body`, showing `label` and the elapsed time (when stdout is a terminal and `label` is not nil).
    package static func `while`<T>(
        _ label: String?, isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T
    ) async rethrows -> T {
        guard let label, isatty(1) == 1 else { return try await body() }
        let started = ContinuousClock.now
        // Owner: this function, which cancels and awaits it.
        let ticker = Task {
            while !Task.isCancelled {
                let elapsed = ContinuousClock.now - started
                Console.status("\(label)… \(elapsed.millisecondsText)")
                try? await Task.sleep(for: .milliseconds(50))
            }
        }
        do {
            let result = try await body()
            ticker.cancel()
            await ticker.value
            Console.endStatus()
            return result
        } catch {
            ticker.cancel()
            await ticker.value
            Console.endStatus()
            throw error
        }
    }
}

/// A plain text table: columns padded to their widest cell, ` | ` between them.
package enum TextTable {
    package static func lines(header: [String], rows: [[String]]) -> [String] {
        let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
        func render(_ row: [String]) -> String {
            row.enumerated().map { cell in
                cell.element + String(repeating: " ", count: max(0, widths[cell.offset] - cell.element.count))
            }.joined(separator: " | ")
        }
        return [render(header), widths.map { String(repeating: "-", count: $0) }.joined(separator: "-+-")]
            + rows.map(render)
    }
}
