import Dispatch
import PostgresTestSupport
import ResourceKit
import ResourceKitObservation
@_spi(Testing) import ResourceKitIO
import ResourceKitTesting
import TestSupport
import Testing

@testable import PostgresAdapter

/// Host names are resolved on the blocking pool and handed to libpq as `hostaddr`, so `PQconnectPoll` never
/// calls a blocking `getaddrinfo` on the cooperative pool (issue #11, point 6).
@Suite struct PostgresHostNameTests {
    @Test func aHostNameBecomesAnAddressNextToTheName() async throws {
        let info = try ConnectionInfo("host=localhost port=5432 user=u")
        #expect(info.hostNamesToResolve == ["localhost"])
        let resolved = try await info.resolvingHostNames(on: .shared, boundTo: nil)
        let addresses = try #require(resolved.value(of: "hostaddr")).split(
            separator: ",", omittingEmptySubsequences: false)
        let hosts = try #require(resolved.value(of: "host")).split(separator: ",", omittingEmptySubsequences: false)
        #expect(addresses.contains("127.0.0.1") || addresses.contains("::1"))
        #expect(hosts.allSatisfy { $0 == "localhost" } && hosts.count == addresses.count)
        #expect(resolved.value(of: "port")?.split(separator: ",").count == addresses.count)
    }

    @Test func multiHostListsKeepTheirOrderAndSocketsAndNumbersStayAsTheyAre() async throws {
        let info = try ConnectionInfo("host=/tmp,127.0.0.1,localhost port=1,2,3")
        let resolved = try await info.resolvingHostNames(on: .shared, boundTo: nil)
        let hosts = try #require(resolved.value(of: "host")).split(separator: ",", omittingEmptySubsequences: false)
            .map(String.init)
        let addresses = try #require(resolved.value(of: "hostaddr")).split(
            separator: ",", omittingEmptySubsequences: false
        ).map(String.init)
        let ports = try #require(resolved.value(of: "port")).split(separator: ",").map(String.init)
        #expect(Array(hosts.prefix(2)) == ["/tmp", "127.0.0.1"])
        #expect(Array(addresses.prefix(2)) == ["", ""])
        #expect(Array(ports.prefix(3)) == ["1", "2", "3"])
        #expect(hosts.count == addresses.count && addresses.count == ports.count)
        let mismatched = try ConnectionInfo("host=a,b,c port=1,2")
        await #expect { try await mismatched.resolvingHostNames(on: .shared, boundTo: nil) } throws: {
            ($0 as? PostgresError)?.code == .invalidConfiguration
        }
        let unknown = try ConnectionInfo("host=no-such-host.invalid")
        await #expect { try await unknown.resolvingHostNames(on: .shared, boundTo: nil) } throws: {
            ($0 as? PostgresError)?.code == .connection
        }
        #expect(try ConnectionInfo("host=db hostaddr=10.0.0.1").hostNamesToResolve.isEmpty)
    }

    @Test func aHostNameConninfoConnects() async throws {
        // A cluster of our own on 127.0.0.1 (RESOURCEKIT_TEST_POSTGRES may name another host), reached as localhost.
        let conninfo = try await ProductionShapes.shared().conninfo(.scramTCP)
        try await withResourceScope("localhost", registry: ResourceRegistry()) { scope in
            let connection = try await PostgresConnection.connect(
                conninfo.replacingOccurrences(of: "host=127.0.0.1", with: "host=localhost"), in: scope)
            #expect(try await connection.query("SELECT 1").count == 1)
        }
    }

    /// A resolution that cannot start yet (the blocking pool is busy: as slow as DNS gets) is cancelled at
    /// once, and nothing is left registered.
    @Test func cancellingDuringASlowResolutionReturnsAtOnce() async throws {
        let pool = BlockingPool(threadCount: 1, name: "rk.test.resolve")
        let release = DispatchSemaphore(value: 0)
        let busy = OneShotEvent()
        pool.submit {
            busy.set()
            release.wait()  // a pool thread may block: that is what it is for
        }
        try await busy.wait(deadline: .now + .seconds(10))
        let registry = ResourceRegistry()
        let task = Task {
            try await withResourceScope("resolve", registry: registry) { scope in
                try await PostgresConnection.connect(
                    "host=localhost port=1 user=u", in: scope, configuration: .init(blockingPool: pool))
            }
        }
        try await until("resolution queued", pool.queuedCountUpdates()) { $0 == 1 }
        let cancelled = ContinuousClock.now
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(ContinuousClock.now - cancelled < TimingBound.singleShot)
        #expect(registry.liveCount == 0)
        release.signal()
        pool.shutdown()
    }
}

/// Notices never reach stderr: a handler gets them, or the registry (issue #11, point 7).
@Suite struct PostgresNoticeTests {
    @Test func aWarningReachesTheHandler() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let received = Locked<[PostgresNotice]>([])
        try await withResourceScope("notices", registry: ResourceRegistry()) { scope in
            let connection = try await PostgresConnection.connect(
                conninfo, in: scope,
                configuration: .init(onNotice: { notice in
                    received.withLock { $0.append(notice) }
                }))
            try await connection.execute("DO $$ BEGIN RAISE WARNING 'x'; END $$")
        }
        let notices = received.withLock { $0 }
        #expect(notices.count == 1)
        #expect(notices.first?.severity == "WARNING")
        #expect(notices.first?.message == "x")
        #expect(
            notices.first.map { !$0.description.contains("x") } == true, "a notice's description must hold no user data"
        )
    }

    @Test func withoutAHandlerANoticeIsARegistryEvent() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let registry = ResourceRegistry()
        let events = registry.events()
        try await withResourceScope("notices", registry: registry) { scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            try await connection.execute("DO $$ BEGIN RAISE NOTICE 'secret payload'; END $$")
        }
        let seen = await collectEvents(events) {
            $0.contains { if case .adapter("postgres.notice.NOTICE") = $0.what { true } else { false } }
        }
        #expect(seen.contains { if case .adapter("postgres.notice.NOTICE") = $0.what { true } else { false } })
    }
}

#if canImport(Glibc)
import Glibc
#endif
