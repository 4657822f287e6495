import Foundation
import ResourceKit
import ResourceKitTesting
import Testing

/// The kit against the example's seeded bugs: each is caught by the check that names it, with the message that
/// names the fix. `SEEDED_RUNS=20` runs each variant 20 times and requires 19 catches (the detection rate the
/// README quotes); the default is one run each.
extension SQLiteExampleTests {
    @Suite struct SeededSQLiteTests {
        /// An exchange that works for a few milliseconds, as real statements do (a late interrupt needs something
        /// running to land on).
        static let echo = """
            SELECT ? FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 20000) \
            SELECT count(*) FROM c)
            """
        static let runs = ProcessInfo.processInfo.environment["SEEDED_RUNS"].flatMap(Int.init) ?? 1

        @Test(arguments: [
            (SeededSQLiteDatabase.Bug.stepOnCooperativePool, "the cooperative pool stays free", "holds it"),
            (.interruptFromDetachedTask, "reuse after an operation-level cancel", "a late cancel reached the next"),
            (
                .interruptOnceBeforeTheStep, "reuse after an operation-level cancel",
                "a blocking call the cancel did not"
            ),
            (.noInterrupt, "external work stops on an operation-level cancel", "was still running"),
            (.deadlineAsCancellation, "a scope deadline surfaces", "instead of DeadlineExceededError"),
        ])
        func eachSeededBugIsCaughtWithTheRightMessage(
            bug: SeededSQLiteDatabase.Bug, check: String, message: String
        ) async throws {
            if let only = ProcessInfo.processInfo.environment["SEEDED_BUG"], only != bug.rawValue { return }
            var caught = 0
            var last = ""
            for _ in 0..<Self.runs {
                let folder = try TemporaryFolder()
                let report = await AdapterConformance<SeededSQLiteDatabase>(
                    "seeded sqlite (\(bug))",
                    make: { scope in try await SeededSQLiteDatabase.open(folder.newFile(), bug: bug, in: scope) },
                    blockingOperation: { database in
                        _ = try await database.query(SQLiteExampleTests.SQLiteDatabaseTests.endless)
                    },
                    exchange: { database, token in
                        try await database.query(Self.echo, [token]).first.flatMap { $0 } ?? ""
                    },
                    externalWorkRunning: { database in database.runningStatements > 0 }
                ).run()
                let failing = report.failures.filter { $0.name.hasPrefix(check) }
                if failing.contains(where: { $0.failure?.contains(message) == true }) { caught += 1 }
                last = "\(report)"
            }
            print("seeded \(bug): caught \(caught) of \(Self.runs)")
            #expect(
                caught >= Self.runs - Self.runs / 20, "\(bug): caught \(caught) of \(Self.runs); last report:\n\(last)")
        }
    }
}
