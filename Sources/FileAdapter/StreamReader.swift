public import ResourceKit
public import ResourceKitIO

#if canImport(Glibc)
import Glibc
#endif

/// A readable stream that can be waited on: a pipe, a FIFO, a character device, or standard input.
/// Reads are non-blocking and wait for data through the reactor.
///
/// Cancellation: a read blocked on a silent writer resumes immediately with `CancellationError` when its task,
/// scope or the reader is cancelled (`DeadlineExceededError` when the scope's deadline passes). The writer
/// going away is the end of the stream (`nil`), not an error. The scope's end closes the descriptor once.
public final class StreamReader: SynchronouslyClosedResource, BufferedByteReader, CustomStringConvertible {
    /// The resource kind of stream readers.
    public static let kind = ResourceKind(name: "file.stream", closeTimeout: .seconds(2))

    let descriptor: GuardedDescriptor
    private let registration = HandleSlot()
    /// Read-ahead for `readLine` and friends.
    public let readAhead = ReadAhead()
    /// Flags to restore on close when the descriptor is shared with the rest of the process (stdin).
    private let restoreFlags: (fd: Int32, flags: Int32)?

    /// A FIFO reads as ended (`read` returns 0) until its first writer connects: see ``receive(upTo:)``.
    private let isFIFO: Bool

    private init(fd: Int32, reactor: IOReactor, restoreFlags: (fd: Int32, flags: Int32)?) {
        descriptor = GuardedDescriptor(fd, reactor: reactor)
        self.restoreFlags = restoreFlags
        var info = stat()
        isFIFO = fstat(fd, &info) == 0 && info.st_mode & S_IFMT == S_IFIFO
    }

    public var description: String { "StreamReader(\(descriptor))" }

    /// The descriptor this reader owns while it is open (empty once closed), for the conformance kit's leak
    /// check, which attributes descriptors to the resource under test instead of diffing the whole process.
    @_spi(Testing) public var ownedDescriptors: [Int32] {
        (try? descriptor.withDescriptor { [$0] }) ?? []
    }

    /// Opens a FIFO or character device for reading (non-blocking: opening a FIFO does not wait for a writer).
    /// - Throws: ``FileError`` (`notFound`, `permissionDenied`, `isDirectory`, `notAStream` for a regular file).
    public static func open(path: String, in scope: ResourceScope, reactor: IOReactor = .shared) async throws
        -> StreamReader
    {
        try scope.checkCancellation()
        let fd = Glibc.open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { throw FileError.from(errno: Syscall.errno, path: path, call: "open") }
        var info = stat()
        fstat(fd, &info)
        let type = info.st_mode & S_IFMT
        if type == S_IFDIR || type == S_IFREG {
            Syscall.close(fd)
            throw FileError(type == S_IFDIR ? .isDirectory : .notAStream, path: path, call: "open", errno: 0)
        }
        return try await register(StreamReader(fd: fd, reactor: reactor, restoreFlags: nil), label: "stream", in: scope)
    }

    /// Takes ownership of a readable pipe end (or any pollable descriptor) and registers it in `scope`. The
    /// descriptor is made non-blocking and closed by the scope.
    public static func adopt(_ fd: Int32, in scope: ResourceScope, reactor: IOReactor = .shared) async throws
        -> StreamReader
    {
        try Syscall.setNonBlocking(fd)
        return try await register(StreamReader(fd: fd, reactor: reactor, restoreFlags: nil), label: "pipe", in: scope)
    }

    /// Standard input as a stream (a pipe, FIFO or terminal; for a redirected regular file use ``FileReader``
    /// with `/dev/stdin`). Works on a duplicate of descriptor 0; the shared non-blocking flag is restored on close.
    public static func standardInput(in scope: ResourceScope, reactor: IOReactor = .shared) async throws -> StreamReader
    {
        var info = stat()
        fstat(0, &info)
        if info.st_mode & S_IFMT == S_IFREG {
            throw FileError(.notAStream, path: "/dev/stdin", call: "fstat", errno: 0)
        }
        let original = fcntl(0, F_GETFL)
        let fd = fcntl(0, F_DUPFD_CLOEXEC, 3)
        guard fd >= 0, original >= 0 else {
            throw FileError.from(errno: Syscall.errno, path: "/dev/stdin", call: "dup")
        }
        try? Syscall.setNonBlocking(fd)
        return try await register(
            StreamReader(fd: fd, reactor: reactor, restoreFlags: (0, original)), label: "stdin", in: scope)
    }

    private static func register(_ reader: StreamReader, label: String, in scope: ResourceScope) async throws
        -> StreamReader
    {
        try await reader.registration.register(reader, in: scope, kind: kind, label: label)
        return reader
    }

    /// Reads what is available (at most `maxBytes`, at least one); `nil` once every writer is gone.
    /// Cancellation: see the type's documentation.
    ///
    /// A FIFO that no writer has opened yet is not at its end: the read waits for the first writer. The end
    /// comes when every writer that came has gone (Linux reports `POLLHUP` only after a writer connected).
    public func receive(upTo maxBytes: Int) async throws -> [UInt8]? {
        let handle = registration.handle
        while true {
            let bytes = try await descriptor.readSome(upTo: maxBytes, boundTo: handle) {
                FileError.from(errno: $0, path: "stream", call: "read")
            }
            guard bytes == nil, isFIFO else { return bytes }
            let now = try descriptor.withDescriptor { Self.pollNow($0) }
            // A writer may have come, written and gone between the read and the poll: read what it left first.
            if now & Int16(POLLIN) != 0 { continue }
            if now & Int16(POLLHUP) != 0 { return nil }
            // No writer yet: wait until one writes or comes and goes, then read again.
            try await descriptor.perform(.readable, boundTo: handle) { fd in Self.pollNow(fd) != 0 ? () : nil }
        }
    }

    /// `poll` with a zero timeout: the `POLLIN`/`POLLHUP` bits now set on `fd`.
    private static func pollNow(_ fd: Int32) -> Int16 {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        _ = poll(&entry, 1, 0)
        return entry.revents & Int16(POLLIN | POLLHUP)
    }

    /// Nothing to stop outside the process: ResourceKit already resumed a blocked read.
    public func cancel() {}

    /// Closes the descriptor once (restoring standard input's flags).
    public func closeSynchronously() {
        descriptor.close()
        if let restoreFlags { _ = fcntl(restoreFlags.fd, F_SETFL, restoreFlags.flags) }
    }
}
