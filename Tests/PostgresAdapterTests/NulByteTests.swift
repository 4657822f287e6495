import PostgresAdapter
import PostgresTestSupport
import ResourceKit
import Testing

/// A NUL byte in statement text or a parameter value would cut libpq's C string there: a statement would run as a
/// prefix of itself (`DELETE FROM t\0 WHERE ...` as `DELETE FROM t`), a value would bind as a prefix. Each such
/// call is refused before anything is sent, and the connection stays usable.
@Suite struct NulByteTests {
    func expectRefused(_ part: String, _ body: () async throws -> Void) async {
        await #expect {
            try await body()
        } throws: {
            guard let error = $0 as? PostgresError else { return false }
            return error.code == .invalidQuery && error.message.contains(part) && error.message.contains("NUL")
        }
    }

    @Test func statementsAndValuesHoldingANulByteAreRefusedBeforeTheySend() async throws {
        let conninfo = try await TestDatabase.conninfo()
        try await withResourceScope("nul", registry: ResourceRegistry()) { scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            try await connection.execute("CREATE TEMP TABLE nul_rows (id int)")
            try await connection.execute("INSERT INTO nul_rows VALUES (1), (2)")

            await expectRefused("statement") { try await connection.execute("DELETE FROM nul_rows\u{0} WHERE id = 1") }
            await expectRefused("$2") { _ = try await connection.query("SELECT $1::text, $2::text", ["a", "b\u{0}c"]) }
            await expectRefused("statement") {
                _ = try await connection.pipeline([
                    PostgresStatement("DELETE FROM nul_rows WHERE id = 2"),
                    PostgresStatement("SELECT 1\u{0}"),
                ])
            }
            await expectRefused("statement") { _ = try await connection.copyOut("COPY nul_rows TO STDOUT\u{0}") }

            // Nothing ran: no prefix of the DELETE, not the pipeline's first statement; the connection is usable.
            let rows = try await connection.query("SELECT count(*)::int FROM nul_rows")
            #expect(try rows.first?.decode(Int.self, at: 0) == 2)
            #expect(!connection.isBroken)
            let echoed = try await connection.query("SELECT $1::text", ["a b"])
            #expect(try echoed.first?.decode(String.self, at: 0) == "a b")
        }
    }
}
