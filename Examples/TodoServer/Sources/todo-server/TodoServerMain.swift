import Foundation
import PostgresAdapter
import ResourceKit
import ResourceKitIO
import SocketAdapter
import TodoService

/// `todo-server [--listen HOST:PORT] [--metrics HOST:PORT] [--deadline SECONDS] [--grace SECONDS] --postgres URL`
///
/// Prints one line when it listens (`listening on HOST:PORT, metrics on HOST:PORT`), then nothing until it stops.
/// SIGTERM or SIGINT begins a graceful shutdown (a second one ends the grace at once); it exits 0 once the last
/// client was answered. Exit status 2 for bad arguments, 1 for a failure.
@main struct TodoServerMain {
    static func main() async {
        do {
            let options = try Options(CommandLine.arguments.dropFirst())
            let pool = try PostgresPool(conninfo: options.postgres, maxConnections: 16)
            let service = TodoService(pool: pool, requestDeadline: options.deadline)
            let shutdown = GracefulShutdown(grace: options.grace)
            let signals = try shutdown.handleSignals()
            defer { withExtendedLifetime(signals) {} }
            try await withResourceScope("todo-server") { scope in
                try await service.prepare()
                let listener = try await SocketListener.bind(
                    host: options.listen.host, port: options.listen.port, in: scope)
                var metrics: SocketListener?
                var line = "listening on \(options.listen.host):\(listener.port)"
                if let address = options.metrics {
                    let bound = try await SocketListener.bind(host: address.host, port: address.port, in: scope)
                    line += ", metrics on \(address.host):\(bound.port)"
                    metrics = bound
                }
                FileHandle.standardOutput.write(Data((line + "\n").utf8))  // unbuffered: a supervisor reads it at once
                try await TodoServer.run(service, on: listener, metrics: metrics, shutdown: shutdown)
            }
            await pool.shutdown()
        } catch let error as Options.UsageError {
            FileHandle.standardError.write(Data("todo-server: \(error.message)\n\(Options.usage)\n".utf8))
            exit(2)
        } catch {
            FileHandle.standardError.write(Data("todo-server: \(error)\n".utf8))
            exit(1)
        }
    }
}

struct Options {
    struct UsageError: Error { let message: String }
    static let usage =
        "usage: todo-server [--listen HOST:PORT] [--metrics HOST:PORT] [--deadline SECONDS] [--grace SECONDS] "
        + "--postgres URL"

    var listen = (host: "127.0.0.1", port: 7070)
    var metrics: (host: String, port: Int)?
    var deadline: Duration = .milliseconds(500)
    var grace: Duration = .seconds(10)
    var postgres = ""

    init(_ arguments: ArraySlice<String>) throws {
        var rest = arguments
        while let flag = rest.popFirst() {
            guard let value = rest.popFirst() else { throw UsageError(message: "\(flag) needs a value") }
            switch flag {
            case "--listen": listen = try Self.address(value)
            case "--metrics": metrics = try Self.address(value)
            case "--deadline": deadline = try Self.seconds(value, flag)
            case "--grace": grace = try Self.seconds(value, flag)
            case "--postgres": postgres = value
            default: throw UsageError(message: "unknown option \(flag)")
            }
        }
        if postgres.isEmpty { throw UsageError(message: "--postgres URL is required") }
    }

    static func address(_ text: String) throws -> (host: String, port: Int) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
            (0...65_535).contains(port)
        else { throw UsageError(message: "\(text): expected HOST:PORT") }
        return (String(text[..<colon]), port)
    }

    static func seconds(_ text: String, _ flag: String) throws -> Duration {
        guard let value = Double(text), value >= 0, value <= 86_400 else {
            throw UsageError(message: "\(flag) \(text): expected seconds (0 to 86400)")
        }
        return .milliseconds(Int64(value * 1000))
    }
}
