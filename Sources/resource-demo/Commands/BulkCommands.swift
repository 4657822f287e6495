import DemoRuntime
import DemoCommandLine
import PostgresAdapter
import ResourceKit

/// `resource-demo listen` and `resource-demo copy`: LISTEN/NOTIFY and COPY, each cancellable.
enum BulkCommands {
    static let listenFlags: Set<String> = ["--channel", "--cancel-after", "--postgres"]
    static let copyFlags: Set<String> = ["--rows", "--cancel-after", "--postgres"]

    /// Prints notifications on `--channel` until Ctrl-C or `--cancel-after`; with `--json`, one line each.
    static func listen(_ arguments: Arguments) async throws -> Int32 {
        let channel = try arguments.required("--channel")
        let cancelAfter = try arguments.duration("--cancel-after")
        let json = arguments.has("--json")
        return try await PostgresTarget.with(arguments.value("--postgres"), quiet: json) { conninfo in
            try await withResourceScope("demo.listen") { scope in
                let listener = try await PostgresListener.listen(to: [channel], conninfo: conninfo, in: scope)
                if !json { Console.line("listening on \"\(channel)\" (Ctrl-C to stop)") }
                let report = await runCancellable(cancelAfter: cancelAfter) {
                    var count = 0
                    for try await notification in listener {
                        count += 1
                        if json {
                            var line = JSONLine()
                            line.set("event", .string("notification"))
                            line.set("channel", .string(notification.channel))
                            line.set("payload", .string(notification.payload))
                            line.set("sender_pid", .int(Int64(notification.senderPID)))
                            Console.line(line.text)
                        } else {
                            Console.line(
                                """
                                \(notification.channel): \(notification.payload) (from backend \
                                \(notification.senderPID))
                                """
                            )
                        }
                    }
                    return count
                }
                if json {
                    var line = report.json
                    line.set("command", .string("listen"))
                    line.set("dropped", .int(Int64(listener.droppedCount)))
                    Console.line(line.text)
                } else if report.outcome.isStopped {
                    Console.line("stopped listening; the session was closed on the server")
                }
                return report.exitStatus
            }
        }
    }

    /// Loads `--rows` generated rows into a temporary table with COPY FROM STDIN, cancelled after
    /// `--cancel-after` if given, then asks the server how many rows it holds (0 after a cancel: nothing is
    /// committed).
    static func copy(_ arguments: Arguments) async throws -> Int32 {
        let rows = try arguments.integer("--rows", in: 1...100_000_000) ?? 1_000_000
        let cancelAfter = try arguments.duration("--cancel-after")
        let json = arguments.has("--json")
        return try await PostgresTarget.with(arguments.value("--postgres"), quiet: json) { conninfo in
            try await withResourceScope("demo.copy") { scope in
                let connection = try await PostgresConnection.connect(conninfo, in: scope)
                try await connection.execute("CREATE TEMPORARY TABLE resource_demo_copy (n int8, label text)")
                let sent = Locked(0)
                let report = await runCancellable(cancelAfter: cancelAfter) {
                    try await connection.copyIn(
                        "COPY resource_demo_copy FROM STDIN", from: GeneratedRows(count: rows, sent: sent))
                }
                // The server's own count, on the same connection (its next operation finishes the aborted COPY).
                let held =
                    try await connection.query("SELECT count(*) FROM resource_demo_copy").first?.decode(Int.self, at: 0)
                    ?? -1
                if json {
                    var line = report.json
                    line.set("command", .string("copy"))
                    line.set("rows_sent", .int(Int64(sent.withLock { $0 })))
                    line.set("rows_in_table", .int(Int64(held)))
                    Console.line(line.text)
                } else {
                    switch report.outcome {
                    case .completed(let loaded):
                        Console.line("COPY loaded \(loaded) rows; the table holds \(held)")
                    case .cancelled:
                        Console.line(
                            """
                            COPY cancelled after \(sent.withLock { $0 }) rows were sent (returned \
                            \(report.cancelToReturn?.millisecondsText ?? "?") after the cancel); the table holds \
                            \(held) rows: nothing was committed
                            """
                        )
                    case .deadlineExceeded:
                        Console.line("deadline exceeded; the table holds \(held) rows")
                    case .failed(let error):
                        Console.error("resource-demo: \(error)")
                    }
                }
                return report.exitStatus
            }
        }
    }

    /// `n<TAB>row n` lines, 10,000 per chunk.
    struct GeneratedRows: AsyncSequence, Sendable {
        typealias Element = [UInt8]
        let count: Int
        let sent: Locked<Int>

        struct AsyncIterator: AsyncIteratorProtocol {
            var next = 1
            let count: Int
            let sent: Locked<Int>
            mutating func next() async throws -> [UInt8]? {
                guard next <= count else { return nil }
                let last = Swift.min(next + 9_999, count)
                var text = ""
                text.reserveCapacity((last - next + 1) * 20)
                for value in next...last { text += "\(value)\trow \(value)\n" }
                sent.withLock { $0 = last }
                next = last + 1
                return Array(text.utf8)
            }
        }

        func makeAsyncIterator() -> AsyncIterator { AsyncIterator(count: count, sent: sent) }
    }
}
