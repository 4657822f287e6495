/// An error of the Redis adapter: a code, and hiredis's or the adapter's message (never a command's arguments).
public struct RedisError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        public let description: String
        init(_ name: String) { description = name }

        /// The connection could not be made.
        public static let connect = Code("connect")
        /// The connection ended (the server closed it, or it was shut down).
        public static let connectionLost = Code("connectionLost")
        /// hiredis could not encode a command or parse a reply.
        public static let protocolError = Code("protocolError")
        /// The server answered with an error reply (``RedisReply/error(_:)``).
        public static let server = Code("server")
    }

    /// The code.
    public let code: Code
    /// What hiredis or the server said.
    public let message: String

    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "RedisError.\(code): \(message)" }
}
