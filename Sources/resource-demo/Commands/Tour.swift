import DemoRuntime
import DemoCommandLine
import FileAdapter
import Glibc
import PostgresAdapter
import ResourceKit
import ResourceKitPatterns
import SocketAdapter

/// `resource-demo [tour]`: socket, FIFO and Postgres cancellation and the latest-wins pattern, ending with a
/// table of what tore each resource down, how long the cancelled task took to return, and what the other
/// side confirmed.
enum Tour: Sendable {
    struct Row: Sendable {
        var resource: String
        var tornDownBy: String
        var cancelToReturn: Duration?
        var confirmation: String
    }

    static func run(_ arguments: Arguments) async throws -> Int32 {
        let json = arguments.has("--json")
        if !json {
            Console.line(
                "ResourceKit tour: resources live as long as their task scope and stop the moment it is cancelled.\n")
        }
        let local = try await localParts(json: json)
        let postgres = try await PostgresTarget.with(arguments.value("--postgres"), quiet: json) { conninfo in
            try await postgresParts(conninfo: conninfo, json: json)
        }
        let rows = local + postgres
        if json {
            for row in rows {
                var line = JSONLine(["resource": .string(row.resource), "torn_down_by": .string(row.tornDownBy)])
                line.set("cancel_to_return_us", row.cancelToReturn.map { .int($0.microseconds) } ?? .null)
                line.set("server_confirmation", .string(row.confirmation))
                Console.line(line.text)
            }
        } else {
            printTable(rows)
        }
        return 0
    }

    // MARK: the parts

    static func localParts(json: Bool) async throws -> [Row] {
        var rows: [Row] = []
        rows.append(try await socketPart(json: json))
        rows.append(try await fifoPart(json: json))
        return rows
    }

    static func socketPart(json: Bool) async throws -> Row {
        try await withResourceScope("tour.socket") { scope in
            let listener = try await SocketListener.bind(in: scope)
            let port = listener.port
            async let accepted = listener.accept(in: scope)
            // The task owns a scope with the connection in it: cancelling the task tears the socket down.
            let report = await LiveStatus.while(json ? nil : "socket: reading from a silent peer") {
                await runCancellable(cancelAfter: .milliseconds(150)) {
                    try await withResourceScope("tour.client") { client in
                        let connection = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: client)
                        return try await connection.read(upTo: 64)
                    }
                }
            }
            let peer = try await accepted
            let peerSaw: String
            switch await withOutcome({ try await peer.read(upTo: 64) }) {
            case .completed(nil): peerSaw = "peer saw end of stream"
            case .completed: peerSaw = "peer saw data"
            case .failed(let error as SocketError) where error.code == .connectionReset: peerSaw = "peer saw a reset"
            case let other: peerSaw = "peer: \(other.name)"
            }
            say(
                json,
                """
                1. socket: a read blocked on a loopback peer that never writes, cancelled after 150 ms: \
                \(report.outcome.name) after \(text(report.cancelToReturn)); \(peerSaw)
                """
            )
            return Row(
                resource: "socket read", tornDownBy: "task cancelled", cancelToReturn: report.cancelToReturn,
                confirmation: peerSaw)
        }
    }

    static func fifoPart(json: Bool) async throws -> Row {
        let fifo = try SilentFIFO(name: "tour")
        return try await withResourceScope("tour.fifo", deadline: .now + .milliseconds(150)) { scope in
            let reader = try await StreamReader.open(path: fifo.path, in: scope)
            let outcome = await LiveStatus.while(json ? nil : "FIFO: reading from a silent writer") {
                await withOutcome { try await reader.read(upTo: 64) }
            }
            let returned = ContinuousClock.now
            let late = scope.deadline.map { returned - $0 }
            say(
                json,
                """
                2. FIFO: a read on a FIFO whose writer stays silent, in a scope with a 150 ms deadline: \
                \(outcome.name) \(text(late)) after the deadline
                """
            )
            return Row(
                resource: "FIFO read", tornDownBy: "scope deadline", cancelToReturn: late,
                confirmation: "descriptor closed by the scope")
        }
    }

    static func postgresParts(conninfo: String, json: Bool) async throws -> [Row] {
        var rows: [Row] = []
        try await withResourceScope("tour.postgres") { scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            let report = await LiveStatus.while(json ? nil : "Postgres: SELECT pg_sleep(30) running") {
                await runCancellable(cancelAfter: .milliseconds(300)) {
                    try await connection.execute("SELECT pg_sleep(30)")
                }
            }
            // Only a verified backend can be observed (behind a pooler the pid libpq holds names no process).
            var state = "not observable (unverified backend)"
            if let pid = connection.backendPID {
                state = try await PgCommand.observeState(of: pid, conninfo: conninfo, in: scope)
            }
            let probe = await withOutcome { try await connection.query("SELECT 1").count == 1 }
            if probe.isStopped { throw CancellationError() }  // a signal: stop the tour, do not report "not reusable"
            let reusable = probe.value == true
            say(
                json,
                """
                3. Postgres: SELECT pg_sleep(30), cancelled after 300 ms: \(report.outcome.name) after \
                \(text(report.cancelToReturn)); backend \(connection.backendPID.map(String.init) ?? "?") is \
                \(state) in pg_stat_activity; connection reusable: \(reusable)
                """
            )
            rows.append(
                Row(
                    resource: "Postgres query", tornDownBy: "task cancelled", cancelToReturn: report.cancelToReturn,
                    confirmation: "backend \(state) in pg_stat_activity"))
        }
        say(json, "4. latest wins: ids a, ab, abc, abcd, abcde arrive 50 ms apart; each run is a 200 ms query")
        let summary = try await LatestCommand.demonstrate(
            ids: ["a", "ab", "abc", "abcd", "abcde"], debounce: nil, conninfo: conninfo
        ) { id, result in
            say(json, "   update \(id.padding(toLength: 6, withPad: " ", startingAt: 0)) \(result)")
        }
        say(
            json,
            """
               committed: \(summary.committed ?? "nothing"); \(summary.stats.cancelled) superseded runs cancelled \
            on the server
            """
        )
        let debounced = try await LatestCommand.demonstrate(
            ids: ["a", "ab", "abc", "abcd", "abcde"], debounce: .milliseconds(300), conninfo: conninfo
        ) { _, _ in }
        say(
            json,
            """
               the same burst with a 300 ms debounce: \(debounced.serverExecutions) query reached the server, \
            committed \(debounced.committed ?? "nothing")\n
            """
        )
        rows.append(
            Row(
                resource: "latest-wins task", tornDownBy: "newer id", cancelToReturn: nil,
                confirmation:
                    """
                    \(summary.serverExecutions) started, \(summary.stats.cancelled) cancelled; debounced: \
                    \(debounced.serverExecutions) ran
                    """
            ))
        return rows
    }

    // MARK: output

    static func say(_ json: Bool, _ line: String) {
        if !json { Console.line(line) }
    }

    static func text(_ duration: Duration?) -> String {
        duration.map { "\($0.microseconds) µs" } ?? "-"
    }

    static func printTable(_ rows: [Row]) {
        let header = ["resource", "torn down by", "cancel → return", "confirmed by the other side"]
        let cells = rows.map { [$0.resource, $0.tornDownBy, text($0.cancelToReturn), $0.confirmation] }
        for line in TextTable.lines(header: header, rows: cells) { Console.line(line) }
        Console.line(
            """
            \n(cancel → return is measured from a task on the cooperative pool; the FIFO row counts from the \
            deadline.)
            """
        )
    }
}
