import DemoRuntime
import DemoCommandLine
import PostgresAdapter
import PostgresActivity
import ResourceKit

/// `resource-demo pg --sql SQL [--cancel-after DURATION] [--deadline DURATION] [--postgres URL] [--json]`: runs one
/// statement; a cancel (the timer or a signal) sends a cancel request, and the command reports whether the backend
/// is idle. A deadline is also carried to the server as the statement's `statement_timeout`.
enum PgCommand: Sendable {
    static let valueFlags: Set<String> = ["--sql", "--cancel-after", "--deadline", "--postgres"]

    static func run(_ arguments: Arguments) async throws -> Int32 {
        let sql = try arguments.required("--sql")
        let cancelAfter = try arguments.duration("--cancel-after")
        let deadline = try arguments.duration("--deadline")
        let json = arguments.has("--json")
        return try await PostgresTarget.with(arguments.value("--postgres"), quiet: json) { conninfo in
            try await withResourceScope("demo.pg") { scope in
                let connection = try await PostgresConnection.connect(conninfo, in: scope)
                let report = await runCancellable(cancelAfter: cancelAfter) {
                    guard let deadline else { return try await connection.execute(sql) }
                    let instant = ContinuousClock.now + deadline
                    return try await withResourceOperation(boundTo: nil, deadline: instant, onCancel: { _ in }) {
                        try await connection.execute(sql)
                    }
                }
                // Server-side confirmation, from a second connection: is our backend still running a query?
                var backendState: String?
                // Only a verified backend can be observed: behind a pooler the pid libpq holds names no process.
                if report.cancelToReturn != nil, !Task.isCancelled, let pid = connection.backendPID {
                    // Best effort: a report without the state says "not checked". A signal arriving here
                    // is not lost: the process exits with the signal's status whatever this returns.
                    backendState = try? await observeState(of: pid, conninfo: conninfo, in: scope)
                }
                emit(report, pid: connection.backendPID, backendState: backendState, json: json)
                return report.exitStatus
            }
        }
    }

    /// Waits (up to 2 s) until `pid` is not `active`, seen from a new connection; returns the state seen last.
    static func observeState(of pid: Int32, conninfo: String, in scope: ResourceScope) async throws -> String {
        let observer = try await PostgresConnection.connect(conninfo, in: scope)
        let probe = PostgresActivityProbe(observer: observer)
        try await probe.waitUntil(.notActive(.pid(pid)), within: .seconds(2))
        return try await probe.state(of: pid) ?? "gone"
    }

    static func emit(_ report: RunReport<PostgresResult>, pid: Int32?, backendState: String?, json: Bool) {
        let backend = pid.map { "backend \($0)" } ?? "the backend (not observable: unverified, e.g. behind a pooler)"
        if json {
            var line = report.json
            line.set("command", .string("pg"))
            if let pid { line.set("backend_pid", .int(Int64(pid))) }
            if let backendState { line.set("backend_state", .string(backendState)) }
            if let result = report.outcome.value {
                line.set("rows", .int(Int64(result.rows.count)))
                line.set("command_tag", .string(result.commandTag))
            }
            Console.line(line.text)
            return
        }
        switch report.outcome {
        case .completed(let result):
            for row in result.rows {
                Console.line(row.values.map { $0 ?? "NULL" }.joined(separator: "\t"))
            }
            Console.line("(\(result.commandTag), \(backend))")
        case .cancelled:
            let latency = report.cancelToReturn.map { " in \($0.millisecondsText)" } ?? ""
            Console.line(
                "cancelled: the task returned\(latency); \(backend) is \(backendState ?? "not checked") on the server")
        case .deadlineExceeded:
            Console.line("deadline exceeded (\(backend))")
        case .failed(let error):
            Console.error("resource-demo: \(error)")
        }
    }
}
