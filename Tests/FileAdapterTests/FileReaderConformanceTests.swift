@_spi(Testing) import FileAdapter
import Glibc
import ResourceKit
import ResourceKitTesting
import TestSupport
import Testing

/// The shipped file reader, following a file as it grows (`tail -f`), passes the conformance kit: its operation
/// is a read at the end of an empty file, waiting for growth.
@Suite(.serialized) struct FileReaderConformanceTests {
    /// The files the kit's readers follow, with an appending writer each (the newest entry for a reader's
    /// identifier is its own: identifiers are reused once freed).
    final class Appenders: Sendable {
        private let files = Locked<[(reader: ObjectIdentifier, fd: Int32, path: String)]>([])
        func add(_ reader: FileReader, _ fd: Int32, _ path: String) {
            files.withLock { $0.append((ObjectIdentifier(reader), fd, path)) }
        }
        func append(_ text: String, to reader: FileReader) {
            let fd = files.withLock { $0.last { $0.reader == ObjectIdentifier(reader) }?.fd } ?? -1
            _ = write(fd, text, text.utf8.count)
        }
        func removeAll() {
            for (_, fd, path) in files.withLock({ $0 }) {
                close(fd)
                unlink(path)
            }
        }
    }

    @Test func followingFileReaderPassesTheKit() async throws {
        let appenders = Appenders()
        let counter = Locked(0)
        let kit = AdapterConformance<FileReader>(
            "FileReader (follow)",
            make: { scope in
                let number = counter.withLock { count -> Int in
                    count += 1
                    return count
                }
                let path = "/tmp/rk-conformance-\(getpid())-\(number).log"
                let writer = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0o600)
                guard writer >= 0 else { throw SystemError.current("open") }
                let reader = try await FileReader.open(path: path, follow: true, in: scope)
                appenders.add(reader, writer, path)
                return reader
            },
            blockingOperation: { reader in _ = try await reader.receive(upTo: 1) },
            completeOperation: { reader in appenders.append("x", to: reader) },
            ownedDescriptors: { reader in reader.ownedDescriptors },
            exchange: { reader, token in
                // A file has no request side: the test appends the "reply" (only from a live task, as a
                // requester would), and the reader must read exactly it.
                try Task.checkCancellation()
                appenders.append(token + "\n", to: reader)
                return try await reader.readLine() ?? ""
            }
        )
        defer { appenders.removeAll() }
        let report = try await runConformance(kit)
        print(report)
        #expect(report.passed, "\(report)")
    }
}
