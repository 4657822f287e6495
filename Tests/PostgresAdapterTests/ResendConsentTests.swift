import PostgresActivity
import PostgresTestSupport
import ResourceKit
import Testing

@testable import PostgresAdapter

/// A cancel that did not stop its query is sent again only with the consent of the pool's driver that sends on the
/// connection (Docs/Architecture.md, "The Postgres adapter": a resend would stop an innocent shared statement).
/// Through a real server: the statement survives the first cancel, as one that reached another server would.
@Suite struct ResendConsentTests {
    /// Sleeps until cancelled, then 1.5 s more, swallowing every cancel meanwhile: the statement outlives its first
    /// cancel request as one that reached another server would, and a resend (which goes out while it is still on
    /// the wire) does not end it either. Swallowing them all, not only the first, also covers a cancel request that
    /// reaches the backend as two signals (the postmaster signals the backend and then its process group).
    static let survivesOneCancel = """
        CREATE FUNCTION pg_temp.rk_survive_one_cancel() RETURNS int LANGUAGE plpgsql AS $$
        DECLARE
            until timestamptz;
        BEGIN
            BEGIN
                PERFORM pg_sleep(30);
            EXCEPTION WHEN query_canceled THEN
                NULL;
            END;
            until := clock_timestamp() + interval '1.5 seconds';
            WHILE clock_timestamp() < until LOOP
                BEGIN
                    PERFORM pg_sleep(extract(epoch FROM until - clock_timestamp()));
                EXCEPTION WHEN query_canceled THEN
                    NULL;
                END;
            END LOOP;
            RETURN 1;
        END $$
        """

    /// The resends a connection made for a statement whose caller was cancelled, its consent answering `wanted`.
    static func resends(consent wanted: Bool) async throws -> UInt64 {
        let registry = ResourceRegistry()
        let conninfo = try await TestDatabase.conninfo()
        let resent = try await withResourceScope("consent", registry: registry) { scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            let observer = try await PostgresConnection.connect(conninfo, in: scope)
            try await connection.execute(survivesOneCancel)
            connection.askBeforeResending { wanted }
            let pid = try #require(connection.backendPID)
            let caller = Task { try await connection.query("SELECT pg_temp.rk_survive_one_cancel()") }
            // In the first sleep, where the first cancel is caught (no event offers another process's wait).
            let asleep = try await PostgresActivityProbe.poll(every: .milliseconds(1), within: .seconds(10)) {
                let rows = try await observer.query(
                    "SELECT count(*)::int FROM pg_stat_activity WHERE pid = $1 AND wait_event = 'PgSleep'", [pid])
                return try rows[0].decode(Int.self, at: 0) == 1
            }
            caller.cancel()
            await #expect(throws: CancellationError.self) { _ = try await caller.value }
            #expect(asleep != nil, "the statement never slept")
            // The next statement waits until the abandoned one ended: any resend went out before.
            #expect(try await connection.query("SELECT 1").count == 1)
            return registry.snapshot().counters[PostgresConnection.kind.name]?.adapterEvents["postgres.cancel.resent"]
        }
        #expect(registry.liveCount == 0)
        return resent ?? 0
    }

    @Test func aDriverThatNoLongerWantsTheCancelKeepsItFromBeingSentAgain() async throws {
        #expect(try await Self.resends(consent: false) == 0)
    }

    @Test func aDriverThatStillWantsTheCancelHasItSentAgain() async throws {
        #expect(try await Self.resends(consent: true) >= 1)
    }
}
