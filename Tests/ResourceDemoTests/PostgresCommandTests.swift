import Foundation
import Glibc
import PostgresAdapter
import PostgresTestSupport
import ResourceKit
import ResourceKitTesting
import TestSupport
import Testing

/// `pg`, `latest` and `serve` against the test server, observed from a second connection.
@Suite struct PostgresCommandTests {
    @Test func pgCancelledByCancelAfterExitsZeroAndTheBackendIsIdle() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let (status, process) = try await DemoProcess.run([
            "pg", "--sql", "SELECT pg_sleep(30)", "--cancel-after", "300ms", "--postgres", conninfo, "--json",
        ])
        #expect(status == 0, "stderr: \(process.standardError)")
        let line = try #require(process.jsonLines.first)
        #expect(line["outcome"] as? String == "cancelled")
        #expect(line["backend_state"] as? String == "idle")
        #expect((line["backend_pid"] as? Int ?? 0) > 0)
        #expect((line["cancel_to_return_us"] as? Int).map { $0 < 1_000_000 } == true)
    }

    @Test func pgCompletedAndFailedOutcomes() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let (status, process) = try await DemoProcess.run(["pg", "--sql", "SELECT 41 + 1", "--postgres", conninfo])
        #expect(status == 0)
        #expect(process.standardOutput.hasPrefix("42\n"))
        let (failedStatus, failed) = try await DemoProcess.run([
            "pg", "--sql", "SELEKT 1", "--postgres", conninfo, "--json",
        ])
        #expect(failedStatus == 1)
        #expect(failed.jsonLines.first?["outcome"] as? String == "failed")
    }

    /// SIGINT cancels the root scope: the query is cancelled on the server, the process exits 130.
    @Test func sigintDuringPgExits130AndTheQueryIsGone() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let marker = "rk-sigint-\(UInt32.random(in: 0...UInt32.max))"
        let process = try DemoProcess([
            "pg", "--sql", "SELECT pg_sleep(30) /* \(marker) */", "--postgres", conninfo, "--json",
        ])
        try await withResourceScope("observer", registry: ResourceRegistry()) { scope in
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            let pid = try await TestDatabase.activeBackend(running: marker, observer: observer)
            process.signal(SIGINT)
            #expect(try await process.exitStatus() == 130)
            #expect(try await TestDatabase.waitUntilNotActive(pid, observer: observer) != nil)
        }
    }

    @Test func latestWithDebounceReachesTheServerOnce() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let (status, process) = try await DemoProcess.run([
            "latest", "--ids", "a,ab,abc", "--debounce", "300ms", "--postgres", conninfo, "--json",
        ])
        #expect(status == 0, "stderr: \(process.standardError)")
        let summary = try #require(process.jsonLines.last)
        #expect(summary["committed"] as? String == "abc")
        #expect(process.jsonLines.count == 4, "one line per update and the summary")
        // The ids are fed 50 ms apart; on a loaded machine a gap can outlast the debounce, and then an id that
        // was quiet for 300 ms rightly starts. The claim holds for the gaps the demo measured.
        let accepted = try #require(summary["started"] as? Int)
        let debouncedAway = try #require(summary["debounced_away"] as? Int)
        let executions = try #require(summary["server_executions"] as? Int)
        let longestGap = try #require(summary["longest_gap_us"] as? Int)
        let began = accepted - debouncedAway  // runs whose work began after the debounce
        #expect(accepted == 3)
        #expect(executions >= 1 && executions <= began, "only a run whose work began can reach the server")
        if longestGap < 300_000 {
            #expect(began == 1, "no update was quiet for the debounce: only the last one's work may begin")
            #expect(executions == 1)
        }
    }
}
