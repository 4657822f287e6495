public import ResourceKit
public import ResourceKitIO

#if canImport(Glibc)
import Glibc
#endif

/// A regular file read in chunks with `pread` on the blocking pool (regular files cannot be waited on with
/// epoll), optionally following the file as it grows (`tail -f`).
///
/// Cancellation: a cancelled read resumes at once with `CancellationError`; no further chunk is started and a
/// chunk job still queued on the pool is dropped. A chunk read already running on a pool thread cannot be
/// interrupted: it finishes (its bytes are discarded) and closing the file waits for it, so the worst-case
/// delay before the descriptor is closed is one chunk read (`chunkSize` bytes; 64 KiB by default). In follow
/// mode the wait for growth is a reactor wait on an inotify descriptor and stops at once.
public final class FileReader: ManagedResource, BufferedByteReader, CustomStringConvertible {
    /// The resource kind of file readers.
    public static let kind = ResourceKind(name: "file.regular", closeTimeout: .seconds(5))

    /// The path given at open.
    public let path: String
    /// Bytes per `pread`.
    public let chunkSize: Int
    /// Whether reads at the end of the file wait for it to grow.
    public let follows: Bool
    /// Read-ahead for `readLine` and friends.
    public let readAhead = ReadAhead()

    /// The descriptor; the lock is held during each `pread`, so close waits for a running chunk.
    private let fd: Locked<Int32?>
    private let offset = Locked<Int64>(0)
    private let growth: GuardedDescriptor?
    private let pool: BlockingPool
    private let registration = HandleSlot()

    private init(path: String, fd: Int32, chunkSize: Int, growth: GuardedDescriptor?, pool: BlockingPool) {
        self.path = path
        self.fd = Locked(fd)
        self.chunkSize = chunkSize
        self.follows = growth != nil
        self.growth = growth
        self.pool = pool
    }

    public var description: String { "FileReader(chunk \(chunkSize), follows: \(follows))" }

    /// The descriptors this reader owns while it is open (the file, and the inotify watch when following; empty
    /// once closed), for the conformance kit's leak check, which attributes descriptors to the resource under
    /// test instead of diffing the whole process.
    @_spi(Testing) public var ownedDescriptors: [Int32] {
        let file = fd.withLock { $0 }.map { [$0] } ?? []
        let watch = (try? growth?.withDescriptor { [$0] }) ?? []
        return file + watch
    }

    /// Opens a regular file for reading (the `open` runs on the blocking pool).
    ///
    /// - Parameters:
    ///   - path: the file to read.
    ///   - chunkSize: bytes per `pread`; also the worst-case work left after a cancellation.
    ///   - follow: at the end of the file, wait for it to grow instead of ending the stream.
    ///   - scope: the scope that owns the reader (closed when it ends).
    ///   - pool: the blocking pool the reads run on.
    ///   - reactor: the reactor that waits for growth (`follow`).
    /// - Throws: ``FileError`` (`notFound`, `permissionDenied`, `isDirectory`, `notARegularFile`), or the
    ///   scope's cancellation.
    public static func open(
        path: String,
        chunkSize: Int = 64 * 1024,
        follow: Bool = false,
        in scope: ResourceScope,
        pool: BlockingPool = .shared,
        reactor: IOReactor = .shared
    ) async throws -> FileReader {
        try scope.checkCancellation()
        let opened = try await pool.run(deadline: scope.deadline) { () throws -> (Int32, Int32?) in
            let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw FileError.from(errno: Syscall.errno, path: path, call: "open") }
            var info = stat()
            fstat(fd, &info)
            let type = info.st_mode & S_IFMT
            guard type == S_IFREG else {
                Syscall.close(fd)
                throw FileError(type == S_IFDIR ? .isDirectory : .notARegularFile, path: path, call: "open", errno: 0)
            }
            guard follow else { return (fd, nil) }
            do {
                return (fd, try Syscall.watchFileChanges(path: path))
            } catch let error as SystemError {
                Syscall.close(fd)
                throw FileError.from(errno: error.errno, path: path, call: "inotify_add_watch")
            }
        }
        let reader = FileReader(
            path: path, fd: opened.0, chunkSize: max(1, chunkSize),
            growth: opened.1.map { GuardedDescriptor($0, reactor: reactor) }, pool: pool
        )
        try await reader.registration.register(reader, in: scope, kind: kind, label: follow ? "file (follow)" : "file")
        return reader
    }

    /// Reads the next chunk (at most `min(maxBytes, chunkSize)` bytes); `nil` at the end of the file unless
    /// following. Cancellation: see the type's documentation.
    public func receive(upTo maxBytes: Int) async throws -> [UInt8]? {
        let handle = registration.handle
        let count = max(1, min(maxBytes, chunkSize))
        while true {
            let start = offset.withLock { $0 }
            let (fd, path) = (self.fd, self.path)
            let chunk = try await pool.run(boundTo: handle) { () throws -> [UInt8] in
                try fd.withLock { fd -> [UInt8] in
                    guard let fd else { throw ResourceKitError(.descriptorClosed, "the file was closed") }
                    var buffer = [UInt8](repeating: 0, count: count)
                    do {
                        let n = try Syscall.value("pread") {
                            buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, count, off_t(start)) }
                        }
                        buffer.removeLast(count - n)
                        return buffer
                    } catch let error as SystemError {
                        throw FileError.from(errno: error.errno, path: path, call: "pread")
                    }
                }
            }
            if !chunk.isEmpty {
                offset.withLock { $0 = start + Int64(chunk.count) }
                return chunk
            }
            guard let growth else { return nil }
            try await waitForGrowth(growth, handle: handle)
        }
    }

    /// Waits until inotify reports a change, then drains its queue.
    private func waitForGrowth(_ growth: GuardedDescriptor, handle: ResourceHandle?) async throws {
        try await growth.perform(.readable, boundTo: handle) { fd -> Bool? in
            var buffer = [UInt8](repeating: 0, count: 4096)
            var drained = false
            while true {
                let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, 4096) }
                if n > 0 {
                    drained = true
                    continue
                }
                return drained ? true : nil
            }
        }
    }

    /// Nothing to stop outside the process: ResourceKit resumed the reader, and the pool drops a queued chunk.
    public func cancel() {}

    /// Closes the file once, after a chunk read that may still be running (on the blocking pool, so no
    /// cooperative thread waits for it).
    public func close() async throws {
        growth?.close()
        let fd = self.fd
        let closeNow: @Sendable () -> Void = {
            fd.withLock { fd in
                if let open = fd { Syscall.close(open) }
                fd = nil
            }
        }
        do {
            try await pool.run(closeNow)
        } catch {
            // The pool refused (shut down or full): close here; at worst this waits for one chunk read.
            closeNow()
        }
    }
}
