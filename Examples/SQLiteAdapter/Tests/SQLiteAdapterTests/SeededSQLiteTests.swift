import Foundation
import ResourceKit
import ResourceKitTesting
import Testing

/// The kit against the example's seeded bugs: each is caught by the check that names it, with the message that
/// names the fix. `SEEDED_RUNS=20` runs each variant 20 times and requires 19 catches (the detection rate the
/// README quotes). The default, what CI runs, is five runs each, three of which must catch it: several checks
/// cancel at random points, and a detection rate is a rate. Under `.ci/run`'s load the interrupt-once variant
/// was caught in 24 of 27 runs over nine validations (about 0.89, against 19 of 20 on a quiet machine), until
/// its long statement took 2 ms to start (`SeededSQLiteDatabase`): its window no longer depends on where a random
/// cancel lands, and it was caught 10 of 10 alone and beside two busy loops.
extension SQLiteExampleTests {
    @Suite struct SeededSQLiteTests {
        /// An exchange that works for a few milliseconds, as real statements do (a late interrupt needs something
        /// running to land on).
        static let echo = """
            SELECT ? FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 20000) \
            SELECT count(*) FROM c)
            """
        static let runs = ProcessInfo.processInfo.environment["SEEDED_RUNS"].flatMap(Int.init) ?? 5
        /// Catches required: 19 of 20 (and so on) from 20 runs, a majority below that.
        static var required: Int { runs >= 20 ? runs - runs / 20 : runs / 2 + 1 }

        /// The checks that catch each variant (a check's name starts with `check`) and what their message says.
        /// A lost interrupt at the start leaves the statement running: the start check's probe sees it, or the
        /// exchange after it hangs in the reuse check, whichever check's cancel lands in the window first.
        static let catches: [SeededSQLiteDatabase.Bug: [(check: String, message: String)]] = [
            .stepOnCooperativePool: [("the cooperative pool stays free", "holds it")],
            .interruptFromDetachedTask: [("reuse after an operation-level cancel", "a late cancel reached the next")],
            .interruptOnceBeforeTheStep: [
                ("reuse after an operation-level cancel", "a blocking call the cancel did not"),
                ("cancels at the start of the blocking call", "a cancelled call went on in the library"),
            ],
            .noInterrupt: [("external work stops on an operation-level cancel", "was still running")],
            .deadlineAsCancellation: [("a scope deadline surfaces", "instead of DeadlineExceededError")],
            // Every check closes its resource and looks at its descriptors the moment the scope ended.
            .closeWithoutWaiting: [("", "close() left 1 descriptor(s) open")],
            .noCheckpoint: [("checkpoint", "the probe saw work from an operation started in a cancelled task")],
        ]

        @Test(arguments: SeededSQLiteDatabase.Bug.allCases)
        func eachSeededBugIsCaughtWithTheRightMessage(bug: SeededSQLiteDatabase.Bug) async throws {
            let catches = try #require(Self.catches[bug], "no expected check for \(bug)")
            if let only = ProcessInfo.processInfo.environment["SEEDED_BUG"], only != bug.rawValue { return }
            var caught = 0
            var last = ""
            var fewestCatching = Int.max
            for _ in 0..<Self.runs {
                let folder = try TemporaryFolder()
                let report = await AdapterConformance<SeededSQLiteDatabase>(
                    "seeded sqlite (\(bug))",
                    make: { scope in try await SeededSQLiteDatabase.open(folder.newFile(), bug: bug, in: scope) },
                    blockingOperation: { database in
                        _ = try await database.query(SQLiteExampleTests.SQLiteDatabaseTests.endless, slowStart: true)
                    },
                    ownedDescriptors: { _ in folder.openDescriptors() },
                    exchange: { database, token in
                        try await database.query(Self.echo, [token]).first.flatMap { $0 } ?? ""
                    },
                    externalWorkRunning: { database in database.runningStatements > 0 }
                ).run()
                let catching = report.failures.filter { failure in
                    catches.contains { expected in
                        failure.name.hasPrefix(expected.check) && failure.failure?.contains(expected.message) == true
                    }
                }.count
                if catching > 0 { caught += 1 }
                fewestCatching = min(fewestCatching, catching)
                last = "\(report)"
            }
            print("seeded \(bug): caught \(caught) of \(Self.runs) (by at least \(fewestCatching) check(s) each run)")
            #expect(
                caught >= Self.required,
                "\(bug): caught \(caught) of \(Self.runs) (\(Self.required) required); last report:\n\(last)")
        }
    }
}
