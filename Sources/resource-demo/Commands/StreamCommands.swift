import DemoCommandLine
import FileAdapter
import Glibc
import ResourceKit
import SocketAdapter

/// `resource-demo socket --connect HOST:PORT` and `resource-demo file --path PATH`: copy a stream to stdout
/// until its end, a cancel (`--cancel-after`, a signal) or a failure.
enum StreamCommands {
    static func socket(_ arguments: Arguments) async throws -> Int32 {
        guard let target = try arguments.hostPort("--connect") else {
            throw UsageError("socket needs --connect HOST:PORT")
        }
        let cancelAfter = try arguments.duration("--cancel-after")
        let json = arguments.has("--json")
        return try await withResourceScope("demo.socket") { scope in
            let report = await runCancellable(cancelAfter: cancelAfter) {
                let connection = try await SocketConnection.connect(host: target.host, port: target.port, in: scope)
                return try await copyToStandardOutput(connection, echo: !json)
            }
            return emit(report, command: "socket", json: json)
        }
    }

    static func file(_ arguments: Arguments) async throws -> Int32 {
        let path = try arguments.required("--path")
        let cancelAfter = try arguments.duration("--cancel-after")
        let json = arguments.has("--json")
        return try await withResourceScope("demo.file") { scope in
            let report = await runCancellable(cancelAfter: cancelAfter) {
                var info = stat()
                if stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG {
                    return try await copyToStandardOutput(try await FileReader.open(path: path, in: scope), echo: !json)
                }
                return try await copyToStandardOutput(try await StreamReader.open(path: path, in: scope), echo: !json)
            }
            return emit(report, command: "file", json: json)
        }
    }

    /// Copies every chunk to stdout (when `echo`); returns the byte count.
    static func copyToStandardOutput(_ source: some BufferedByteReader, echo: Bool) async throws -> Int {
        var total = 0
        for try await chunk in source.chunks() {
            total += chunk.count
            if echo { chunk.withUnsafeBufferPointer { _ = write(1, $0.baseAddress, $0.count) } }
        }
        return total
    }

    static func emit(_ report: RunReport<Int>, command: String, json: Bool) -> Int32 {
        if json {
            var line = report.json
            line.set("command", .string(command))
            line.set("bytes", report.outcome.value.map { .int(Int64($0)) } ?? .null)
            Console.line(line.text)
        } else {
            switch report.outcome {
            case .completed(let bytes): Console.error("resource-demo: end of stream after \(bytes) bytes")
            case .cancelled:
                Console.error(
                    "resource-demo: cancelled; returned \(report.cancelToReturn?.millisecondsText ?? "?") after the cancel"
                )
            case .deadlineExceeded: Console.error("resource-demo: deadline exceeded")
            case .failed(let error): Console.error("resource-demo: \(error)")
            }
        }
        return report.exitStatus
    }
}
