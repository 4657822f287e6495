import Foundation
import Glibc
import PostgresTestSupport
import ResourceKit
import TestSupport
import Testing

/// What a host process sees of the Postgres adapter, checked on the real binary: nothing printed to stderr,
/// and no host-name lookup on a cooperative thread.
@Suite struct PostgresHygieneTests {
    /// `RAISE WARNING` would be printed by libpq's default notice processor; with ours, stderr stays empty.
    @Test func aServerWarningPrintsNothing() async throws {
        let conninfo = try await TestDatabase.conninfo()
        let (status, process) = try await DemoProcess.run([
            "pg", "--sql", "DO $$ BEGIN RAISE WARNING 'x'; END $$", "--postgres", conninfo,
        ])
        #expect(status == 0)
        #expect(process.standardError.isEmpty, "stderr: \(process.standardError)")
    }

    /// An interposed `getaddrinfo` (LD_PRELOAD, compiled here with the machine's C compiler) logs the name of
    /// the thread of every host-name lookup that can block (numeric lookups, `AI_NUMERICHOST`, cannot). With
    /// `host=localhost`, every such lookup runs on a blocking-pool thread (`rk.blocking.N`), none on the
    /// cooperative pool.
    @Test func hostNamesAreResolvedOnTheBlockingPool() async throws {
        // A cluster of our own on 127.0.0.1 (RESOURCEKIT_TEST_POSTGRES may name another host), reached as localhost.
        let conninfo = try await ProductionShapes.shared().conninfo(.scramTCP)
        let directory = try TestFixtures.directory("gai")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let source = directory + "/gai.c"
        try Self.interposer.write(toFile: source, atomically: true, encoding: .utf8)
        let compiled = try await BackgroundProcess.runToCompletion(
            ["/usr/bin/cc", "-shared", "-fPIC", "-o", directory + "/gai.so", source, "-ldl", "-lpthread"],
            logPath: directory + "/cc.log"
        )
        #expect(
            compiled == 0,
            """
            the interposer did not compile: \
            \((try? String(contentsOfFile: directory + "/cc.log", encoding: .utf8)) ?? "")
            """
        )
        let log = directory + "/calls.log"
        let process = try DemoProcess(
            [
                "pg", "--sql", "SELECT 1", "--postgres",
                conninfo.replacingOccurrences(of: "host=127.0.0.1", with: "host=localhost"),
            ],
            environment: ["LD_PRELOAD": directory + "/gai.so", "RK_GAI_LOG": log]
        )
        #expect(try await process.exitStatus() == 0, "stderr: \(process.standardError)")
        let calls = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        #expect(calls.contains { $0.hasSuffix("\tlocalhost") }, "the interposer saw no lookup of localhost: \(calls)")
        #expect(
            calls.allSatisfy { $0.hasPrefix("rk.blocking") }, "a blocking lookup ran off the blocking pool: \(calls)")
    }

    /// Behind PgBouncer the pid libpq holds is the pooler's key: the demo claims no server-side confirmation
    /// it cannot observe, and says why.
    @Test func behindAPoolerTheDemoSaysTheBackendIsNotObservable() async throws {
        let shapes = try await ProductionShapes.shared()
        let (status, process) = try await DemoProcess.run([
            "pg", "--sql", "SELECT pg_sleep(30)", "--cancel-after", "200ms", "--postgres", shapes.conninfo(.pgbouncer),
        ])
        #expect(status == 0, "stderr: \(process.standardError)")
        #expect(process.standardOutput.contains("not observable"), "stdout: \(process.standardOutput)")
        let (jsonStatus, json) = try await DemoProcess.run([
            "pg", "--sql", "SELECT pg_sleep(30)", "--cancel-after", "200ms", "--postgres", shapes.conninfo(.pgbouncer),
            "--json",
        ])
        #expect(jsonStatus == 0)
        #expect(json.jsonLines.first?["backend_pid"] == nil)
        #expect(json.jsonLines.first?["backend_state"] == nil)
    }

    static let interposer = """
        #define _GNU_SOURCE
        #include <dlfcn.h>
        #include <netdb.h>
        #include <pthread.h>
        #include <stdio.h>
        #include <stdlib.h>

        typedef int (*real_getaddrinfo)(const char *, const char *, const struct addrinfo *, struct addrinfo **);

        int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints, struct addrinfo **res) {
            real_getaddrinfo real = (real_getaddrinfo)dlsym(RTLD_NEXT, "getaddrinfo");
            if (node != NULL && !(hints != NULL && (hints->ai_flags & AI_NUMERICHOST))) {
                char name[64] = "?";
                pthread_getname_np(pthread_self(), name, sizeof name);
                const char *path = getenv("RK_GAI_LOG");
                FILE *log = path ? fopen(path, "a") : NULL;
                if (log) {
                    fprintf(log, "%s\\t%s\\n", name, node);
                    fclose(log);
                }
            }
            return real(node, service, hints, res);
        }
        """
}
