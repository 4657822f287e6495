import CSystemShims
import FileAdapter
import Glibc
import ResourceKit
@_spi(Testing) import ResourceKitIO
import ResourceKitTesting
import TestSupport
import Testing

/// FIFOs and pipes: real `mkfifo`, real `pipe2`.
@Suite struct StreamReaderTests {
    static func makeFIFO() throws -> String {
        let path = "/tmp/rk-fifo-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        guard mkfifo(path, 0o600) == 0 else { throw SystemError.current("mkfifo") }
        return path
    }

    /// A FIFO whose writer stays open and silent: the blocked read returns within 50 ms of `task.cancel()`.
    @Test func blockedFIFOReadReturnsWithin50msOfCancel() async throws {
        try await exclusively {
            let path = try Self.makeFIFO()
            defer { unlink(path) }
            let registry = ResourceRegistry()
            let reactor = IOReactor(name: "t.fifo")
            defer { reactor.shutdown() }
            var rounds: [CancelMeasurement<[UInt8]?>] = []
            for _ in 0..<5 {
                // The writer exists before the reader opens (O_RDWR opens a FIFO without waiting for a reader) and
                // stays silent, so the read can only block.
                let writer = open(path, O_RDWR | O_NONBLOCK)
                try #require(writer >= 0)
                let round = try await measureCancellation {
                    try await withResourceScope("fifo", registry: registry) { scope in
                        let reader = try await StreamReader.open(path: path, in: scope, reactor: reactor)
                        return try await reader.read()
                    }
                } whenParked: {
                    try await until("a wait parks", reactor.waitingDescriptorCounts()) { $0 > 0 }
                }
                rounds.append(round)
                #expect(throws: CancellationError.self) { try round.result.get() }
                Syscall.close(writer)
            }
            #expect(
                median(rounds.map(\.excess)) < TimingBound.median,
                "cancel-to-return \(rounds.map(\.latency)), reference \(rounds.map(\.reference))")
            #expect(registry.liveCount == 0)
        }
    }

    @Test func fifoDeadlineIsItsOwnErrorAndClosesTheDescriptor() async throws {
        let path = try Self.makeFIFO()
        defer { unlink(path) }
        let before = DescriptorLedger.now().count(of: path)
        await #expect(throws: DeadlineExceededError.self) {
            try await withResourceScope("fifo", deadline: .now + .milliseconds(50), registry: ResourceRegistry()) {
                scope in
                let reader = try await StreamReader.open(path: path, in: scope)
                let writer = open(path, O_WRONLY | O_NONBLOCK)
                defer { Syscall.close(writer) }
                return try await reader.read()
            }
        }
        #expect(DescriptorLedger.now().count(of: path) == before)
    }

    /// Writer gone: end of stream, never `CancellationError`.
    @Test func writerThatDiesIsEndOfStream() async throws {
        var fds: [Int32] = [0, 0]
        #expect(rk_pipe_nonblocking(&fds) == 0)
        let writeFD = fds[1]
        try await withResourceScope("pipe", registry: ResourceRegistry()) { scope in
            let reader = try await StreamReader.adopt(fds[0], in: scope)
            let text = Array("one\ntwo\n".utf8)
            _ = text.withUnsafeBytes { write(writeFD, $0.baseAddress, $0.count) }
            Syscall.close(writeFD)
            var lines: [String] = []
            for try await line in reader.lines() { lines.append(line) }
            #expect(lines == ["one", "two"])
        }
    }

    @Test func typedErrorsNameThePath() async throws {
        let registry = ResourceRegistry()
        try await withResourceScope("errors", registry: registry) { scope in
            await #expect { try await StreamReader.open(path: "/no/such/fifo", in: scope) } throws: {
                ($0 as? FileError)?.code == .notFound && ($0 as? FileError)?.path == "/no/such/fifo"
            }
            await #expect { try await StreamReader.open(path: "/tmp", in: scope) } throws: {
                ($0 as? FileError)?.code == .isDirectory
            }
            await #expect { try await StreamReader.open(path: "/etc/hostname", in: scope) } throws: {
                ($0 as? FileError)?.code == .notAStream
            }
        }
        #expect(registry.liveCount == 0)
    }
}
