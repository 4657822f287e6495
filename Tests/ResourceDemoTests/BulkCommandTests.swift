import Foundation
import Glibc
import PostgresAdapter
import PostgresActivity
import PostgresTestSupport
import ResourceKit
import TestSupport
import Testing

/// `listen` and `copy` end to end, on the built binary.
@Suite struct BulkCommandTests {
    @Test func copyCancelledMidWayLoadsNothing() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let (status, process) = try await DemoProcess.run([
            "copy", "--rows", "5000000", "--cancel-after", "200ms", "--postgres", conninfo, "--json",
        ])
        #expect(status == 0, "stderr: \(process.standardError)")
        let line = try #require(process.jsonLines.first)
        #expect(line["outcome"] as? String == "cancelled")
        #expect((line["rows_sent"] as? Int ?? 0) > 0)
        #expect(line["rows_in_table"] as? Int == 0)
    }

    @Test func listenPrintsNotificationsUntilCancelled() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let channel = "rk demo \(UInt32.random(in: 0...UInt32.max))"
        let process = try DemoProcess(["listen", "--channel", channel, "--postgres", conninfo, "--json"])
        try await withResourceScope("notify", registry: ResourceRegistry()) { scope in
            let sender = try await PostgresConnection.connect(conninfo, in: scope)
            // The listener is ready once the server shows a session listening on the channel.
            let listening = try await PostgresActivityProbe(observer: sender).waitUntil(
                .present(.running("LISTEN \"\(channel)\"")), within: .seconds(20))
            try #require(listening != nil, "the listener never ran LISTEN")
            try await sender.execute("SELECT pg_notify($1, 'first'), pg_notify($1, 'second')", [channel])
        }
        _ = try await process.line(containing: "\"second\"", timeout: .seconds(20))
        process.signal(SIGINT)
        #expect(try await process.exitStatus() == 130)
        let payloads = process.jsonLines.filter { $0["event"] as? String == "notification" }.compactMap {
            $0["payload"] as? String
        }
        #expect(payloads == ["first", "second"])
    }
}
