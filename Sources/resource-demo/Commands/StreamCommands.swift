import DemoRuntime
import DemoCommandLine
import FileAdapter
import Glibc
import ResourceKit
import ResourceKitIO
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
            let copied = Locked(0)
            let report = await runCancellable(cancelAfter: cancelAfter) {
                let connection = try await SocketConnection.connect(host: target.host, port: target.port, in: scope)
                return try await copyToStandardOutput(connection, echo: !json, counting: copied)
            }
            return emit(report, bytes: copied.withLock { $0 }, command: "socket", json: json)
        }
    }

    static func file(_ arguments: Arguments) async throws -> Int32 {
        let path = try arguments.required("--path")
        let cancelAfter = try arguments.duration("--cancel-after")
        let json = arguments.has("--json")
        return try await withResourceScope("demo.file") { scope in
            let copied = Locked(0)
            let report = await runCancellable(cancelAfter: cancelAfter) {
                var info = stat()
                if stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG {
                    let reader = try await FileReader.open(path: path, in: scope)
                    return try await copyToStandardOutput(reader, echo: !json, counting: copied)
                }
                let reader = try await StreamReader.open(path: path, in: scope)
                return try await copyToStandardOutput(reader, echo: !json, counting: copied)
            }
            return emit(report, bytes: copied.withLock { $0 }, command: "file", json: json)
        }
    }

    /// Copies every chunk to stdout (when `echo`), adding each chunk's size to `copied` as it goes, so that a
    /// run that is cancelled or fails still reports what it copied; returns the byte count.
    static func copyToStandardOutput(
        _ source: some BufferedByteReader, echo: Bool, counting copied: Locked<Int>
    ) async throws -> Int {
        var total = 0
        for try await chunk in source.chunks() {
            total += chunk.count
            copied.withLock { $0 = total }
            if echo { chunk.withUnsafeBufferPointer { _ = write(1, $0.baseAddress, $0.count) } }
        }
        return total
    }

    /// Prints how the run ended; `bytes` counts what was copied whatever the ending (the JSON's `"bytes"`).
    static func emit(_ report: RunReport<Int>, bytes: Int, command: String, json: Bool) -> Int32 {
        if json {
            var line = report.json
            line.set("command", .string(command))
            line.set("bytes", .int(Int64(bytes)))
            Console.line(line.text)
        } else {
            switch report.outcome {
            case .completed(let bytes): Console.error("resource-demo: end of stream after \(bytes) bytes")
            case .cancelled:
                let latency = report.cancelToReturn?.millisecondsText ?? "?"
                Console.error("resource-demo: cancelled after \(bytes) bytes; returned \(latency) after the cancel")
            case .deadlineExceeded: Console.error("resource-demo: deadline exceeded")
            case .failed(let error): Console.error("resource-demo: \(error)")
            }
        }
        return report.exitStatus
    }
}
