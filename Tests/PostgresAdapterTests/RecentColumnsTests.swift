import PostgresTestSupport
import ResourceKit
import Testing

@testable import PostgresAdapter

/// A result reuses the columns of the connection's previous result only when they have the same names and types in
/// the same order: against a real server, each difference a statement can make gets columns of its own.
@Suite struct RecentColumnsTests {
    /// The address of `columns`' names' storage: equal for two values that share one copy.
    func storage(_ columns: PostgresColumns?) -> UnsafeRawPointer? {
        columns?.names.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) }
    }

    @Test func aResultOfTheSameShapeSharesItsColumnsAndAnyDifferenceMakesNewOnes() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("columns", registry: ResourceRegistry()) { scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            let longName = "a_column_name_longer_than_fifteen_bytes"
            func columns(_ sql: String) async throws -> PostgresColumns? {
                try await connection.query(sql).first?.columns
            }
            let first = try await columns("SELECT 1 AS a, 'x'::text AS \(longName)")
            let again = try await columns("SELECT 2 AS a, 'y'::text AS \(longName)")
            #expect(first?.names == ["a", longName])
            #expect(storage(again) != nil && storage(again) == storage(first))

            // Each of these differs from the statement before it in one way.
            let shapes: [(String, [String], [UInt32])] = [
                ("SELECT 1 AS b, 'x'::text AS \(longName)", ["b", longName], [23, 25]),  // a name
                ("SELECT 1 AS bb, 'x'::text AS \(longName)", ["bb", longName], [23, 25]),  // a name it prefixes
                ("SELECT 1::int8 AS bb, 'x'::text AS \(longName)", ["bb", longName], [20, 25]),  // a type
                ("SELECT 'x'::text AS \(longName), 1::int8 AS bb", [longName, "bb"], [25, 20]),  // the order
                ("SELECT 'x'::text AS \(longName)", [longName], [25]),  // the count
            ]
            var previous = again
            for (sql, names, oids) in shapes {
                let made = try await columns(sql)
                #expect(made?.names == names, "\(sql)")
                #expect(made?.oids == oids, "\(sql)")
                #expect(storage(made) != storage(previous), "\(sql)")
                previous = made
            }

            // The pipeline's results reuse them too; a result without rows still decodes.
            let piped = try await connection.pipeline([
                PostgresStatement("SELECT 'z'::text AS \(longName)"), PostgresStatement("SELECT 1 WHERE false"),
            ])
            #expect(try storage(piped.first?.get().rows.first?.columns) == storage(previous))
            #expect(try piped.last?.get().rows.isEmpty == true)
        }
    }
}
