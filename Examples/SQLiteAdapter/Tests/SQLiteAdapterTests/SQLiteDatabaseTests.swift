import Foundation
import ResourceKit
import ResourceKitTesting
import SQLiteAdapter
import Testing

/// Every test of the example, one at a time: the kit's timing checks want the cores, and a seeded variant that
/// holds the cooperative pool would stall any test running beside it.
@Suite(.serialized) struct SQLiteExampleTests {}

/// The example against the conformance kit and a few behaviours of its own, on real SQLite files.
extension SQLiteExampleTests {
    @Suite struct SQLiteDatabaseTests {
        /// A statement that never ends by itself: counting without a bound. Only an interrupt stops it.
        static let endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"

        @Test func passesTheConformanceKit() async throws {
            let folder = try TemporaryFolder()
            // snippet: sqlite-kit (quoted in Docs/WritingAnAdapter.md)
            let kit = AdapterConformance<SQLiteDatabase>(
                "SQLiteDatabase",
                make: { scope in try await SQLiteDatabase.open(folder.newFile(), in: scope) },
                blockingOperation: { database in _ = try await database.query(Self.endless) },
                ownedDescriptors: { _ in folder.openDescriptors() },  // SQLite's files, found by their folder
                exchange: { database, token in
                    try await database.query("SELECT ?", [token]).first?.first.flatMap { $0 } ?? ""
                },
                externalWorkRunning: { database in database.runningStatements > 0 }
            )
            let report = await kit.run()
            // end snippet
            print(report)
            #expect(report.passed, "\(report)")
        }

        @Test func aCancelledStatementStopsInSQLiteAndTheConnectionLivesOn() async throws {
            let folder = try TemporaryFolder()
            try await withResourceScope("database") { scope in
                let database = try await SQLiteDatabase.open(folder.newFile(), in: scope)
                _ = try await database.query("CREATE TABLE t (x)")
                let endless = Task { try await database.query(Self.endless) }
                while database.runningStatements == 0 { try await Task.sleep(for: .milliseconds(1)) }
                endless.cancel()
                await #expect(throws: CancellationError.self) { try await endless.value }
                #expect(database.runningStatements == 0)
                _ = try await database.query("INSERT INTO t VALUES (?)", ["one"])
                #expect(try await database.query("SELECT x FROM t") == [["one"]])
            }
        }

        @Test func aDeadlineStopsTheStatementAsTheDeadline() async throws {
            let folder = try TemporaryFolder()
            try await withResourceScope("database") { scope in
                let database = try await SQLiteDatabase.open(folder.newFile(), in: scope)
                await #expect(throws: DeadlineExceededError.self) {
                    try await withResourceScope("request", deadline: .now + .milliseconds(100)) { _ in
                        try await database.query(Self.endless)
                    }
                }
                #expect(database.runningStatements == 0)
            }
        }
    }

}

/// A folder for one test's database files, removed when the test ends.
final class TemporaryFolder: Sendable {
    let path: String
    private let counter = Locked(0)

    init() throws {
        let base = ProcessInfo.processInfo.environment["TMPDIR"] ?? NSTemporaryDirectory()
        path = (base as NSString).appendingPathComponent("rk-sqlite-\(UUID().uuidString)")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// The descriptors open on files in the folder (SQLite opens its files itself, so the kit's leak check finds
    /// a database's descriptors by where they point).
    func openDescriptors() -> [Int32] {
        DescriptorLedger.now().entries.filter { $0.value.hasPrefix(path + "/") }.map(\.key)
    }

    /// A path for a new database file in the folder.
    func newFile() -> String {
        let n = counter.withLock { value -> Int in
            value += 1
            return value
        }
        return "\(path)/db-\(n).sqlite"
    }
}
