import EmbeddedPostgres
import Foundation
import PostgresAdapter
import ResourceKit

/// The server a command talks to: `--postgres URL`, else `DATABASE_URL`, else an embedded throwaway cluster
/// started for the command and stopped when it ends (also on an error or a signal).
package enum PostgresTarget {
    package static func with<T>(
        _ flag: String?,
        quiet: Bool = false,
        _ body: (String) async throws -> T
    ) async throws -> T {
        if let configured = flag ?? ProcessInfo.processInfo.environment["DATABASE_URL"], !configured.isEmpty {
            return try await body(configured)
        }
        if !quiet {
            Console.error(
                "\(Console.program): starting a throwaway PostgreSQL cluster (use --postgres URL to name a server)")
        }
        // Shielded, so a signal during the start does not abandon a half-started cluster: the start completes
        // (a few seconds), then the cluster is stopped and the command ends.
        let server = try await LiveStatus.while(quiet ? nil : "initdb and pg_ctl start") {
            try await withCancellationShield { try await EmbeddedPostgres.start() }
        }
        do {
            try Task.checkCancellation()
            let result = try await body(server.conninfo)
            await stop(server)
            return result
        } catch {
            await stop(server)
            throw error
        }
    }

    /// Stops the cluster even when the calling task was cancelled.
    private static func stop(_ server: EmbeddedPostgres) async {
        try? await withCancellationShield(timeout: .seconds(30)) { await server.stop() }
    }
}
