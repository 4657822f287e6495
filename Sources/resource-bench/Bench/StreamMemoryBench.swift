import DemoRuntime
import Foundation
import Glibc
import PostgresAdapter
import ResourceKit

/// Streaming 10 million rows in single-row mode with flat memory.
enum StreamMemoryBench {
    /// Resident set size, KiB.
    static func residentKiB() -> Int {
        guard let file = fopen("/proc/self/statm", "r") else { return 0 }
        defer { fclose(file) }
        var size = 0
        var resident = 0
        withUnsafeMutablePointer(to: &size) { sizePointer in
            withUnsafeMutablePointer(to: &resident) { residentPointer in
                _ = withVaList([sizePointer, residentPointer]) { vfscanf(file, "%ld %ld", $0) }
            }
        }
        return resident * Int(sysconf(Int32(_SC_PAGESIZE))) / 1024
    }

    /// Streams `rows` rows and reports how much resident memory grew after the first 100,000.
    static func streamMemory(rows: Int, conninfo: String) async throws -> (Int, Int, Double) {
        let start = ContinuousClock.now
        var baseline = 0
        var count = 0
        try await withResourceScope("bench.stream", registry: ResourceRegistry()) { scope in
            let connection = try await PostgresConnection.connect(conninfo, in: scope)
            for try await row in try await connection.stream("SELECT generate_series(1, $1::int8)", [rows]) {
                count += 1
                if count == 100_000 { baseline = residentKiB() }
                if count % 100_000 == 0, ProcessInfo.processInfo.environment["BENCH_TRACE"] != nil {
                    print("rows \(count): rss \(residentKiB()) KiB after \(ContinuousClock.now - start)")
                }
                _ = row
            }
        }
        let seconds = Double((ContinuousClock.now - start).microseconds) / 1_000_000
        return (count, residentKiB() - baseline, (seconds * 10).rounded() / 10)
    }

}
