import Dispatch
import FileAdapter
import Glibc
import Synchronization
import ResourceKitTesting
import TestSupport
import Testing

@testable import ResourceKit
@_spi(Testing) @testable import ResourceKitIO

/// Regular files: chunked `pread` on the blocking pool; follow mode through inotify.
@Suite struct FileReaderTests {
    static func makeFile(_ contents: [UInt8]) throws -> String {
        let path = "/tmp/rk-file-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { throw SystemError.current("open") }
        _ = contents.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        Syscall.close(fd)
        return path
    }

    @Test func readsWholeFileInChunks() async throws {
        let contents = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let path = try Self.makeFile(contents)
        defer { unlink(path) }
        try await withResourceScope("file", registry: ResourceRegistry()) { scope in
            let reader = try await FileReader.open(path: path, chunkSize: 4096, in: scope)
            var read: [UInt8] = []
            var chunks = 0
            for try await chunk in reader.chunks() {
                #expect(chunk.count <= 4096)
                read += chunk
                chunks += 1
            }
            #expect(read == contents)
            #expect(chunks == 25)
        }
    }

    @Test func readsLines() async throws {
        let path = try Self.makeFile(Array("alpha\r\nbeta\ngamma".utf8))
        defer { unlink(path) }
        try await withResourceScope("lines", registry: ResourceRegistry()) { scope in
            let reader = try await FileReader.open(path: path, chunkSize: 3, in: scope)
            var lines: [String] = []
            for try await line in reader.lines() { lines.append(line) }
            #expect(lines == ["alpha", "beta", "gamma"])
        }
    }

    /// After cancel no further chunk is started: a chunk job still queued is dropped, and the read returns at
    /// once (the pool's own tests show that a dropped job never runs).
    @Test func queuedChunkIsDroppedOnCancel() async throws {
        try await exclusively {
            let path = try Self.makeFile((0..<1024).map { UInt8(truncatingIfNeeded: $0) })
            defer { unlink(path) }
            let pool = BlockingPool(threadCount: 1, name: "t.file.pool")
            defer { pool.shutdown() }
            let registry = ResourceRegistry()
            try await withResourceScope("file", registry: registry) { scope in
                let reader = try await FileReader.open(path: path, chunkSize: 16, in: scope, pool: pool)
                let gate = DispatchSemaphore(value: 0)
                let blockerStarted = OneShotEvent()
                // Occupy the only pool thread so the reader's chunk job stays queued.
                let blocker = Task {
                    try await pool.run {
                        blockerStarted.set()
                        gate.wait()  // a pool thread may block: that is what it is for
                    }
                }
                try await blockerStarted.wait(deadline: .now + .seconds(10))
                let reading = Task { try await reader.read() }
                try await until("the chunk job is queued", pool.queuedCountUpdates()) { $0 > 0 }
                let cancelled = ContinuousClock.now
                reading.cancel()
                await #expect(throws: CancellationError.self) { try await reading.value }
                #expect(ContinuousClock.now - cancelled < TimingBound.singleShot)
                gate.signal()
                try await blocker.value
                // The dropped chunk did not move the offset: the next read starts at byte 0.
                #expect(try await reader.read() == (0..<16).map { UInt8($0) })
            }
            #expect(registry.liveCount == 0)
        }
    }

    @Test func followModeSeesGrowthAndIsCancellable() async throws {
        try await exclusively {
            let path = try Self.makeFile(Array("start\n".utf8))
            defer { unlink(path) }
            let registry = ResourceRegistry()
            let reactor = IOReactor(name: "t.file.follow")
            defer { reactor.shutdown() }
            let lines = AsyncStream<String>.makeStream()
            let follower = Task {
                try await withResourceScope("tail", registry: registry) { scope in
                    let reader = try await FileReader.open(path: path, follow: true, in: scope, reactor: reactor)
                    for try await line in reader.lines() { lines.continuation.yield(line) }
                }
            }
            var iterator = lines.stream.makeAsyncIterator()
            #expect(await iterator.next() == "start")
            let fd = open(path, O_WRONLY | O_APPEND)
            _ = Array("grown\n".utf8).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            Syscall.close(fd)
            #expect(await iterator.next() == "grown")
            try await until("a wait parks", reactor.waitingDescriptorCounts()) { $0 > 0 }
            let cancelled = ContinuousClock.now
            follower.cancel()
            await #expect(throws: CancellationError.self) { try await follower.value }
            #expect(ContinuousClock.now - cancelled < TimingBound.singleShot)
            #expect(registry.liveCount == 0)
        }
    }

    @Test func typedErrorsNameThePath() async throws {
        try await withResourceScope("errors", registry: ResourceRegistry()) { scope in
            await #expect { try await FileReader.open(path: "/no/such/file", in: scope) } throws: {
                ($0 as? FileError)?.code == .notFound && ($0 as? FileError)?.path == "/no/such/file"
            }
            await #expect { try await FileReader.open(path: "/tmp", in: scope) } throws: {
                ($0 as? FileError)?.code == .isDirectory
            }
            await #expect { try await FileReader.open(path: "/dev/null", in: scope) } throws: {
                ($0 as? FileError)?.code == .notARegularFile
            }
        }
    }

    /// A file deleted while it is read: reading goes on from the open descriptor (POSIX semantics).
    @Test func fileDeletedWhileReadKeepsReading() async throws {
        let path = try Self.makeFile(Array(repeating: 1, count: 10_000))
        try await withResourceScope("deleted", registry: ResourceRegistry()) { scope in
            let reader = try await FileReader.open(path: path, chunkSize: 1000, in: scope)
            _ = try await reader.read()
            unlink(path)
            var total = 1000
            while let chunk = try await reader.read() { total += chunk.count }
            #expect(total == 10_000)
        }
    }
}
