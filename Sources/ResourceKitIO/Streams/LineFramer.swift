import ResourceKit

/// Splits bytes into lines (`\n`, with an optional `\r` before it removed), as a pure value.
struct LineFramer: Sendable {
    /// The maximum number of bytes of one line, without its terminator.
    let maxLength: Int
    private var buffer: [UInt8] = []

    /// Creates a framer for lines of at most `maxLength` bytes.
    init(maxLength: Int) {
        self.maxLength = maxLength
    }

    /// Bytes held that do not form a complete line yet.
    var pending: [UInt8] { buffer }

    /// Adds bytes.
    mutating func append(_ bytes: some Sequence<UInt8>) {
        buffer.append(contentsOf: bytes)
    }

    /// The next complete line, if one is buffered.
    /// - Throws: ``ByteStreamError/Code/lineTooLong`` when `maxLength` bytes are buffered without a newline
    ///   (or a complete line is longer than that).
    mutating func nextLine() throws -> String? {
        if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
            var end = newline
            if end > buffer.startIndex && buffer[end - 1] == UInt8(ascii: "\r") { end -= 1 }
            guard end - buffer.startIndex <= maxLength else {
                throw ByteStreamError(.lineTooLong, limit: maxLength)
            }
            let line = String(decoding: buffer[buffer.startIndex..<end], as: UTF8.self)
            buffer.removeSubrange(buffer.startIndex...newline)
            return line
        }
        if buffer.count > maxLength {
            throw ByteStreamError(.lineTooLong, limit: maxLength)
        }
        return nil
    }

    /// At end of stream: the unterminated rest as a last line, if any.
    mutating func finish() -> String? {
        guard !buffer.isEmpty else { return nil }
        defer { buffer = [] }
        return String(decoding: buffer, as: UTF8.self)
    }
}
