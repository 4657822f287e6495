import Foundation
import Glibc
import PostgresAdapter
import PostgresActivity
import PostgresTestSupport
import ResourceKit
import SocketAdapter
import ResourceKitTesting
import TestSupport
import Testing

/// `serve` end to end: a real server process, real clients on loopback, the database observed directly.
@Suite struct ServeTests {
    /// Both shapes: clients on the cooperative pool with one pool, and (`--reactors 2`) clients on two reactors,
    /// each with its socket and its shard of the pool.
    @Test(arguments: [[String](), ["--reactors", "2"]])
    func disconnectCancelsTheQueryAndBadInputNeverHurtsOtherClients(shape: [String]) async throws {
        let conninfo = try await TestDatabase.conninfo()
        // Its sessions carry their own application name: other tests run `serve` against the same server.
        let application = "rk-serve-\(UInt32.random(in: 0...UInt32.max))"
        let server = try DemoProcess(
            [
                "serve", "--listen", "127.0.0.1:0", "--postgres", conninfo + " application_name=\(application)",
                "--pool", "2",
            ] + shape)
        let listening = try await server.line(containing: "listening on ")
        let port = try #require(Int(listening.split(separator: ":").last ?? ""))

        try await withResourceScope("clients", registry: ResourceRegistry()) { scope in
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            let steady = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
            try await steady.write("PING\n")
            #expect(try await steady.readLine() == "PONG")

            // A client sends SLEEP 30 and disconnects: its backend goes idle promptly (`TimingBound.singleShot`).
            try await withResourceScope("leaving") { leaving in
                let client = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: leaving)
                try await client.write("SLEEP 30\n")
                let pid = try await Self.sleepingBackend(observer: observer, application: application)
                client.resetConnection()
                #expect(try await TestDatabase.waitUntilNotActive(pid, observer: observer) != nil)
            }

            // Bad commands get ERR and the connection stays usable.
            try await steady.write("FROB\n")
            #expect(try await steady.readLine()?.hasPrefix("ERR ") == true)
            try await steady.write("SLEEP forever\n")
            #expect(try await steady.readLine()?.hasPrefix("ERR ") == true)
            try await steady.write("LOCK nine\n")
            #expect(try await steady.readLine()?.hasPrefix("ERR LOCK takes") == true)
            try await steady.write([0xff, 0x00, 0xfe, 0x0a])
            #expect(try await steady.readLine()?.hasPrefix("ERR ") == true)

            // A line over 4 KiB: ERR, then the server closes that connection.
            let flooder = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
            try await flooder.write(String(repeating: "x", count: 5000) + "\n")
            #expect(try await flooder.readLine() == "ERR line too long")
            #expect(try await flooder.readLine() == nil)

            // The steady client still works: a short series, then QUIT.
            try await steady.write("SERIES 5\n")
            var numbers: [String] = []
            while let line = try await steady.readLine(), line != "OK" { numbers.append(line) }
            #expect(numbers == ["1", "2", "3", "4", "5"])
            try await steady.write("QUIT\n")
            #expect(try await steady.readLine() == "BYE")
        }
        server.signal(SIGTERM)
        #expect(try await server.exitStatus() == 0, "serve shuts down gracefully")
    }

    @Test func connectionLimitRefusesExtras() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let server = try DemoProcess([
            "serve", "--listen", "127.0.0.1:0", "--postgres", conninfo, "--max-connections", "1",
        ])
        let port = try #require(
            Int(try await server.line(containing: "listening on ").split(separator: ":").last ?? ""))
        try await withResourceScope("clients", registry: ResourceRegistry()) { scope in
            let first = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
            try await first.write("PING\n")
            #expect(try await first.readLine() == "PONG")
            let second = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
            #expect(try await second.readLine() == "ERR busy")
        }
        server.signal(SIGINT)
        #expect(try await server.exitStatus() == 0, "serve shuts down gracefully")
    }

    /// SIGTERM with `--grace 5`: new connections are refused, a command that finishes within the grace is answered
    /// `OK`, one still running after it gets `ERR` and its query stops on the server, and the process exits 0.
    ///
    /// The command that finishes within the grace is a `LOCK` on an advisory lock the test holds: it runs until the
    /// test lets it go, after the server said it is shutting down, so no timing decides which side it falls on.
    @Test func sigtermAnswersWhatFinishesWithinTheGraceAndStopsTheRest() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let application = "rk-serve-\(UInt32.random(in: 0...UInt32.max))"
        let server = try DemoProcess([
            "serve", "--listen", "127.0.0.1:0", "--postgres", conninfo + " application_name=\(application)",
            "--pool", "2", "--grace", "5",
        ])
        let port = try #require(
            Int(try await server.line(containing: "listening on ").split(separator: ":").last ?? ""))
        try await withResourceScope(
            "clients", deadline: .now + TimingBound.singleShot * 3, registry: ResourceRegistry()
        ) { scope in
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            // A key of this run's own: other processes may take advisory locks on the same server.
            let key = Int64.random(in: 1...Int64.max)
            _ = try await observer.execute("SELECT pg_advisory_lock($1)", [key])
            let long = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
            try await long.write("SLEEP 30\n")
            let pid = try await Self.sleepingBackend(observer: observer, application: application)
            let short = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
            try await short.write("PING\n")
            #expect(try await short.readLine() == "PONG")
            // Its command must be running when the signal comes (a line still unread then is an idle connection's,
            // which the shutdown closes at once): it waits on the test's lock until the test releases it.
            try await short.write("LOCK \(key)\n")
            let probe = PostgresActivityProbe(observer: observer, pollInterval: .milliseconds(10))
            let waiting = try await PostgresActivityProbe.poll(every: probe.pollInterval, within: .seconds(30)) {
                try await !probe.backends(.running("pg_advisory_xact_lock", application: application)).isEmpty
            }
            try #require(waiting != nil, "the LOCK command never reached the server")
            server.signal(SIGTERM)
            _ = try await server.line(containing: "shutting down")
            _ = try await observer.execute("SELECT pg_advisory_unlock($1)", [key])
            await #expect(throws: SocketError.self, "new connections are refused") {
                try await withResourceScope("late") { late in
                    _ = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: late)
                }
            }
            #expect(try await short.readLine() == "OK", "finished within the grace")
            #expect(try await long.readLine()?.hasPrefix("ERR") == true, "still running after the grace")
            #expect(try await TestDatabase.waitUntilNotActive(pid, observer: observer) != nil)
        }
        #expect(try await server.exitStatus() == 0)
    }

    /// Out of descriptors (`ulimit -n 80`, 150 clients connecting), the server neither spins nor dies: it reports
    /// the pause once, stays under half a core, still answers the clients it accepted, and accepts again once they
    /// leave. With `--metrics` too (the second accept loop, and libdispatch's monitor that traps without
    /// descriptors).
    @Test(arguments: [[String](), ["--metrics", "127.0.0.1:0"]])
    func outOfDescriptorsTheServerBacksOffAndServesAgain(extra: [String]) async throws {
        let conninfo = try await TestDatabase.conninfo()
        let server = try DemoProcess(
            ["-c", "ulimit -n 80 && exec \"$0\" \"$@\"", DemoProcess.binary]
                + ["serve", "--listen", "127.0.0.1:0", "--postgres", conninfo] + extra,
            executable: "/bin/sh")
        let port = try #require(
            Int(try await server.line(containing: "listening on ").split(separator: ":").last ?? ""))
        try await withResourceScope(
            "clients", deadline: .now + TimingBound.singleShot * 3, registry: ResourceRegistry()
        ) { scope in
            try await withResourceScope("crowd") { crowd in
                var clients: [SocketConnection] = []
                for _ in 0..<150 {
                    clients.append(try await SocketConnection.connect(host: "127.0.0.1", port: port, in: crowd))
                }
                _ = try await server.line(containing: "accept paused")
                // Time is the subject here: the server's CPU over one second of the pause.
                let before = try Self.cpuSeconds(of: server.pid)
                try await Task.sleep(for: .seconds(1))
                let used = try Self.cpuSeconds(of: server.pid) - before
                #expect(used < 0.5, "the paused server used \(used) s of CPU in 1 s")
                // Its accept loop left descriptors to the rest of the process (its reserve, handed back).
                let open = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(server.pid)/fd").count
                #expect(open <= 80 - 8, "\(open) of 80 descriptors open while paused")
                // The first client was accepted before the descriptors ran out: it is still served.
                try await clients[0].write("PING\n")
                #expect(try await clients[0].readLine() == "PONG")
            }
            // The crowd left (its scope closed every client): the server accepts again.
            _ = try await server.line(containing: "accept resumed")
            let next = try await SocketConnection.connect(host: "127.0.0.1", port: port, in: scope)
            try await next.write("PING\n")
            #expect(try await next.readLine() == "PONG")
        }
        let lines =
            server.standardOutput.split(separator: "\n").count + server.standardError.split(separator: "\n").count
        #expect(lines <= 100, "\(lines) lines of output")
        server.signal(SIGINT)
        #expect(try await server.exitStatus() == 0, "serve shuts down gracefully; stderr: \(server.standardError)")
    }

    /// User and system CPU time of process `pid` so far, in seconds (`/proc/PID/stat`).
    static func cpuSeconds(of pid: Int32) throws -> Double {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // Fields after the command's closing parenthesis: state is field 3, utime 14 and stime 15.
        let fields = stat[stat.index(after: try #require(stat.lastIndex(of: ")")))...].split(separator: " ")
        let ticks = (Double(fields[11]) ?? 0) + (Double(fields[12]) ?? 0)
        return ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    static func sleepingBackend(observer: PostgresConnection, application: String) async throws -> Int32 {
        let probe = PostgresActivityProbe(observer: observer, pollInterval: .milliseconds(10))
        var pid: Int32?
        _ = try await PostgresActivityProbe.poll(every: probe.pollInterval, within: .seconds(30)) {
            pid = try await probe.backends(.running("pg_sleep", application: application)).first
            return pid != nil
        }
        guard let pid else { throw ConditionNeverHeld(description: "the SLEEP query never ran") }
        return pid
    }
}
