@_spi(Testing) import FileAdapter
import Glibc
import ResourceKit
import ResourceKitTesting
import TestSupport
import Testing

/// The shipped FIFO reader passes the conformance kit.
@Suite(.serialized) struct StreamReaderConformanceTests {
    /// The FIFOs the kit's resources read, with a writer each.
    final class Writers: Sendable {
        /// Every FIFO made, in order: a reader's identifier is reused once it is freed, so the newest entry for
        /// an identifier is its reader's, and every entry is cleaned up at the end.
        private let writers = Locked<[(reader: ObjectIdentifier, fd: Int32, path: String)]>([])
        func add(_ reader: StreamReader, _ fd: Int32, _ path: String) {
            writers.withLock { $0.append((ObjectIdentifier(reader), fd, path)) }
        }
        func writer(of reader: StreamReader) -> Int32 {
            writers.withLock { $0.last { $0.reader == ObjectIdentifier(reader) }?.fd } ?? -1
        }
        func removeAll() {
            for (_, fd, path) in writers.withLock({ $0 }) {
                close(fd)
                unlink(path)
            }
        }
    }

    @Test func streamReaderPassesTheKit() async throws {
        let writers = Writers()
        let counter = Locked(0)
        let kit = AdapterConformance<StreamReader>(
            "StreamReader (FIFO)",
            make: { scope in
                let number = counter.withLock { count -> Int in
                    count += 1
                    return count
                }
                let path = "/tmp/rk-conformance-\(getpid())-\(number).fifo"
                unlink(path)
                guard mkfifo(path, 0o600) == 0 else { throw SystemError.current("mkfifo") }
                let writer = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)  // the test's side: a silent writer
                let reader = try await StreamReader.open(path: path, in: scope)
                writers.add(reader, writer, path)
                return reader
            },
            blockingOperation: { reader in _ = try await reader.read(upTo: 1) },
            completeOperation: { reader in
                var byte: UInt8 = 1
                _ = write(writers.writer(of: reader), &byte, 1)
            },
            ownedDescriptors: { reader in reader.ownedDescriptors },
            exchange: { reader, token in
                // A FIFO has no request side: the test writes the "reply" (only from a live task, as a
                // requester would), and the reader must read exactly it.
                try Task.checkCancellation()
                _ = write(writers.writer(of: reader), token + "\n", token.utf8.count + 1)
                return try await reader.readLine() ?? ""
            }
        )
        defer { writers.removeAll() }
        let report = try await runConformance(kit)
        print(report)
        #expect(report.passed, "\(report)")
    }
}
