import ResourceKit

/// Errors of the byte-stream helpers shared by stream adapters.
public struct ByteStreamError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable, Hashable {
        /// The stream ended before the requested number of bytes arrived.
        case unexpectedEndOfStream
        /// A line exceeded the maximum length before its newline arrived.
        case lineTooLong
    }

    public let code: Code
    /// The limit or count involved (bytes).
    public let limit: Int

    public init(_ code: Code, limit: Int) {
        self.code = code
        self.limit = limit
    }

    public var description: String {
        switch code {
        case .unexpectedEndOfStream: return "ByteStreamError: the stream ended before \(limit) bytes arrived"
        case .lineTooLong: return "ByteStreamError: a line exceeded \(limit) bytes"
        }
    }
}
