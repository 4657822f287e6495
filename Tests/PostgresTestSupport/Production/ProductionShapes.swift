public import EmbeddedPostgres
import Foundation
import PostgresAdapter
import ResourceKit
import TestSupport

/// The production shapes the Postgres adapter is tested against, started once per test process and stopped
/// at exit: a cluster with scram-sha-256 passwords and TLS (reached over TCP, TLS and its Unix socket),
/// PgBouncer in transaction mode in front of it, and two servers in their own pid namespaces (overlapping
/// pids) behind a round-robin TCP balancer.
public final class ProductionShapes: Sendable {
    /// One way to reach a server, as a user would configure it.
    public enum Setup: String, CaseIterable, Sendable, CustomStringConvertible {
        case scramTCP = "scram TCP"
        case unixSocket = "Unix socket"
        case tls = "TLS"
        case pgbouncer = "PgBouncer transaction"
        case balancer = "two servers behind a balancer"

        public var description: String { rawValue }
    }

    public static let password = "rk-Secret-7f3a"

    public let secured: EmbeddedPostgres
    public let bouncer: PgBouncerProcess
    public let serverA: NamespacedPostgres
    public let serverB: NamespacedPostgres
    public let balancer: RoundRobinProxy

    /// Started by whichever test asks first; as TestDatabase's, outside that test's scope.
    private static let startup = Task<ProductionShapes, any Error> {
        try await withoutResourceScope { try await start() }
    }

    private static func start() async throws -> ProductionShapes {
        TestFixtures.claim()
        return try await exclusively {
            let secured = try await EmbeddedPostgres.start(
                .init(password: password, tls: true, directoryPrefix: TestDatabase.directoryPrefix))
            secured.stopOnTerminationSignals()
            async let bouncer = PgBouncerProcess.start(serverPort: secured.port, password: password)
            async let serverA = NamespacedPostgres.start()
            async let serverB = NamespacedPostgres.start()
            let a = try await serverA
            let b = try await serverB
            let shapes = ProductionShapes(
                secured: secured,
                bouncer: try await bouncer,
                serverA: a,
                serverB: b,
                balancer: try await RoundRobinProxy.start(upstreams: [a.port, b.port])
            )
            instance.withLock { $0 = shapes }
            atexit { ProductionShapes.terminateAtExit() }
            return shapes
        }
    }

    private static let instance = Locked<ProductionShapes?>(nil)

    /// The shapes, started on first use.
    public static func shared() async throws -> ProductionShapes {
        try await startup.value
    }

    private init(
        secured: EmbeddedPostgres, bouncer: PgBouncerProcess, serverA: NamespacedPostgres, serverB: NamespacedPostgres,
        balancer: RoundRobinProxy
    ) {
        self.secured = secured
        self.bouncer = bouncer
        self.serverA = serverA
        self.serverB = serverB
        self.balancer = balancer
    }

    static func terminateAtExit() {
        guard let shapes = instance.withLock({ $0 }) else { return }
        shapes.balancer.terminateNow()
        shapes.bouncer.terminateNow()
        shapes.serverA.terminateNow()
        shapes.serverB.terminateNow()
        shapes.secured.stopBlocking()
    }

    /// The conninfo a user would write for `setup`.
    public func conninfo(_ setup: Setup) -> String {
        switch setup {
        case .scramTCP: secured.conninfo + " sslmode=disable"
        case .unixSocket: secured.unixSocketConninfo
        case .tls: secured.conninfo + " sslmode=require"
        case .pgbouncer: bouncer.conninfo
        case .balancer: "host=127.0.0.1 port=\(balancer.port) user=postgres dbname=postgres connect_timeout=10"
        }
    }

    /// Direct connections to the real servers behind `setup` (where `pg_stat_activity` tells the truth).
    public func servers(behind setup: Setup) -> [String] {
        switch setup {
        case .scramTCP, .unixSocket, .tls, .pgbouncer: [secured.conninfo + " sslmode=disable"]
        case .balancer: [serverA.conninfo, serverB.conninfo]
        }
    }
}
