import ResourceKit

/// A source of bytes with a small read-ahead buffer: what a stream adapter (socket, pipe, file, a child's
/// stdout) implements to get `read`, `readExactly`, `readLine`, `chunks` and `lines` for free.
///
/// Only one task may read from one source at a time.
public protocol BufferedByteReader: Sendable {
    /// Reads at most `maxBytes` from the underlying source, waiting until at least one byte or the end of the
    /// stream is available; `nil` at the end of the stream.
    ///
    /// Cancellation: implementations bind their wait to their resource's handle, so a cancelled task, scope or
    /// deadline makes it throw `CancellationError` / `DeadlineExceededError` at once.
    func receive(upTo maxBytes: Int) async throws -> [UInt8]?

    /// Bytes received but not consumed yet: store one `ReadAhead()` per source (`let readAhead = ReadAhead()`).
    /// It is opaque: only the reading methods below touch its contents.
    var readAhead: ReadAhead { get }
}

/// The read-ahead buffer of a ``BufferedByteReader``: bytes received but not consumed yet. Opaque to adapters
/// and users; lines longer than 4,096 bytes are refused (``ByteStreamError/Code/lineTooLong``).
public final class ReadAhead: Sendable {
    let framer = Locked(LineFramer(maxLength: 4096))

    /// An empty buffer.
    public init() {}

    func withLock<Result>(_ body: (inout LineFramer) throws -> Result) rethrows -> Result {
        try framer.withLock(body)
    }
}

extension BufferedByteReader {
    /// Reads at most `maxBytes`, waiting for at least one; `nil` at the end of the stream.
    /// Cancellation: as ``receive(upTo:)``; in a task that is already cancelled it throws first and consumes
    /// nothing.
    public func read(upTo maxBytes: Int = 65_536) async throws -> [UInt8]? {
        // A checkpoint: in a cancelled task, nothing buffered is consumed.
        try Task.checkCancellation()
        let buffered = readAhead.withLock { framer -> [UInt8] in
            let bytes = framer.pending
            guard !bytes.isEmpty else { return [] }
            let taken = Array(bytes.prefix(maxBytes))
            var rest = LineFramer(maxLength: framer.maxLength)
            rest.append(bytes.dropFirst(taken.count))
            framer = rest
            return taken
        }
        if !buffered.isEmpty { return buffered }
        return try await receive(upTo: maxBytes)
    }

    /// Reads exactly `count` bytes.
    /// - Throws: ``ByteStreamError/Code/unexpectedEndOfStream`` if the stream ends first; cancellation as
    ///   ``receive(upTo:)`` (bytes read so far are lost).
    public func readExactly(_ count: Int) async throws -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(count)
        while result.count < count {
            guard let bytes = try await read(upTo: count - result.count) else {
                throw ByteStreamError(.unexpectedEndOfStream, limit: count)
            }
            result += bytes
        }
        return result
    }

    /// Reads one line (without its `\n` or `\r\n`); `nil` at the end of the stream. An unterminated last line
    /// is returned as a line. Invalid UTF-8 is replaced with U+FFFD.
    /// - Throws: ``ByteStreamError/Code/lineTooLong`` past `maxLength` bytes; cancellation as
    ///   ``receive(upTo:)``.
    public func readLine(maxLength: Int = 4096) async throws -> String? {
        try Task.checkCancellation()  // a checkpoint: in a cancelled task, nothing buffered is consumed
        while true {
            let line = try readAhead.withLock { framer -> String? in
                if framer.maxLength != maxLength {
                    var resized = LineFramer(maxLength: maxLength)
                    resized.append(framer.pending)
                    framer = resized
                }
                return try framer.nextLine()
            }
            if let line { return line }
            guard let bytes = try await receive(upTo: 65_536) else {
                return readAhead.withLock { $0.finish() }
            }
            readAhead.withLock { $0.append(bytes) }
        }
    }

    /// The stream as an `AsyncSequence` of byte chunks of at most `maxChunk` bytes, ending at end of stream.
    public func chunks(maxChunk: Int = 65_536) -> ByteChunks<Self> {
        ByteChunks(source: self, maxChunk: maxChunk)
    }

    /// The stream as an `AsyncSequence` of lines (see ``readLine(maxLength:)``).
    public func lines(maxLength: Int = 4096) -> TextLines<Self> {
        TextLines(source: self, maxLength: maxLength)
    }
}

/// Chunks of a ``BufferedByteReader``; iteration throws what the reads throw (cancellation included).
public struct ByteChunks<Source: BufferedByteReader>: AsyncSequence, Sendable {
    public typealias Element = [UInt8]
    let source: Source
    let maxChunk: Int

    public struct AsyncIterator: AsyncIteratorProtocol {
        let source: Source
        let maxChunk: Int
        public mutating func next() async throws -> [UInt8]? {
            try await source.read(upTo: maxChunk)
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(source: source, maxChunk: maxChunk) }
}

/// Lines of a ``BufferedByteReader``; iteration throws what the reads throw (cancellation included).
public struct TextLines<Source: BufferedByteReader>: AsyncSequence, Sendable {
    public typealias Element = String
    let source: Source
    let maxLength: Int

    public struct AsyncIterator: AsyncIteratorProtocol {
        let source: Source
        let maxLength: Int
        public mutating func next() async throws -> String? {
            try await source.readLine(maxLength: maxLength)
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(source: source, maxLength: maxLength) }
}
