import Foundation
import Glibc
import PostgresAdapter
import PostgresTestSupport
import ResourceKit
import TestSupport
import Testing

/// Server-side work of a client that died or froze stops too (Docs/Architecture.md, "Nothing outlives its
/// owner"): the session watches for a vanished client (`client_connection_check_interval`, 1 s by default), and a
/// deadline travels to the server as the statement's `statement_timeout`. Each client is a `resource-demo pg` run,
/// killed or frozen mid-query; the server is watched through `pg_stat_activity` on a connection of the test's.
@Suite(.serialized) struct DeadClientServerWorkTests {
    /// Runs `resource-demo pg` with `sql` (marked) through `conninfo`, waits until its statement is active on the
    /// server behind it (`serverConninfo`), sends `signal`, and returns how long the backend stayed active
    /// afterwards (nil: still active after `bound`).
    static func backendActivity(
        after signal: Int32, sql: String, extra: [String] = [], conninfo: String, serverConninfo: String,
        bound: Duration
    ) async throws -> Duration? {
        try await withResourceScope("observer", registry: ResourceRegistry()) { scope in
            let observer = try await PostgresConnection.connect(serverConninfo, in: scope)
            let marker = "rk_client_\(UInt32.random(in: 0...UInt32.max))"
            let demo = try DemoProcess(["pg", "--sql", "\(sql) AS \(marker)", "--postgres", conninfo] + extra)
            defer { demo.signal(SIGKILL) }
            let pid = try await TestDatabase.activeBackend(running: marker, observer: observer)
            demo.signal(signal)
            let took = try await TestDatabase.waitUntilNotActive(pid, observer: observer, within: bound)
            if signal == SIGSTOP { demo.signal(SIGCONT) }
            return took
        }
    }

    /// `kill -9` of a client in the middle of a 30 s statement, straight to the server: the backend notices the
    /// vanished client at its next check (1 s) instead of running the statement to its end.
    @Test func aKilledClientsStatementStopsOnTheServer() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let took = try await exclusively {
            try await Self.backendActivity(
                after: SIGKILL, sql: "SELECT pg_sleep(30)", conninfo: conninfo, serverConninfo: conninfo,
                bound: .seconds(5))
        }
        #expect(took != nil, "the killed client's statement still ran on the server 5 s later")
        print("killed client, direct: backend idle \(took.map { "\($0)" } ?? "never") after kill -9")
    }

    /// A client frozen (`SIGSTOP`) while its statement runs under a 1 s deadline cannot send a cancel: the
    /// deadline it carried to the server as `statement_timeout` ends the statement there at about 1 s.
    @Test func aFrozenClientsDeadlineEndsItsStatementOnTheServer() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let took = try await exclusively {
            try await Self.backendActivity(
                after: SIGSTOP, sql: "SELECT pg_sleep(30)", extra: ["--deadline", "1s"], conninfo: conninfo,
                serverConninfo: conninfo, bound: .seconds(5))
        }
        #expect(took != nil, "the frozen client's statement still ran on the server 5 s later")
        print("frozen client, 1 s deadline: backend idle \(took.map { "\($0)" } ?? "never") after SIGSTOP")
    }

    /// Behind PgBouncer in transaction mode the server session is PgBouncer's, not the client's: no vanished-client
    /// check is set there, and a killed client's statement runs to its end (measured and printed). A deadline
    /// carried with the statement still ends it on the server.
    @Test func behindPgBouncerAKilledClientsStatementEndsAtItsDeadline() async throws {
        let shapes = try await ProductionShapes.shared()
        let conninfo = shapes.conninfo(.pgbouncer)
        let server = shapes.servers(behind: .pgbouncer)[0]
        let (plain, carried) = try await exclusively {
            (
                try await Self.backendActivity(
                    after: SIGKILL, sql: "SELECT pg_sleep(3)", conninfo: conninfo, serverConninfo: server,
                    bound: .seconds(10)),
                try await Self.backendActivity(
                    after: SIGKILL, sql: "SELECT pg_sleep(30)", extra: ["--deadline", "1500ms"], conninfo: conninfo,
                    serverConninfo: server, bound: .seconds(5))
            )
        }
        print(
            "killed client behind PgBouncer: a 3 s statement stayed active \(plain.map { "\($0)" } ?? "> 10 s") "
                + "after kill -9; with a 1.5 s deadline \(carried.map { "\($0)" } ?? "> 5 s")")
        #expect(carried != nil, "the deadline carried through PgBouncer did not end the statement on the server")
    }
}
