import ResourceKit

#if canImport(Glibc)
import Glibc
#endif

/// A file failure, naming the path the caller gave (the caller's own input; it is never logged by
/// ResourceKit) and the `errno`.
public struct FileError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    ///
    /// An opaque code: compare it with the static members (`error.code == .notFound`). New codes may be
    /// added in any release, so a `switch` over codes needs a `default`.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }

        /// No such file or directory (`ENOENT`).
        public static let notFound = Code("notFound")
        /// Not allowed (`EACCES`, `EPERM`).
        public static let permissionDenied = Code("permissionDenied")
        /// The path names a directory.
        public static let isDirectory = Code("isDirectory")
        /// A regular file was given where a stream (pipe, FIFO, device) was expected: use ``FileReader``.
        public static let notAStream = Code("notAStream")
        /// A pipe, FIFO or device was given where a regular file was expected: use ``StreamReader``.
        public static let notARegularFile = Code("notARegularFile")
        /// The process or system ran out of descriptors (`EMFILE`, `ENFILE`).
        public static let tooManyOpenFiles = Code("tooManyOpenFiles")
        /// The device reported an I/O error (`EIO`).
        public static let ioError = Code("ioError")
        /// Any other `errno`; see ``errno``.
        public static let other = Code("other")

        /// The code's name, as in `FileError.connectionRefused`.
        public var description: String { name }
    }

    public let code: Code
    public let path: String
    public let call: String
    public let errno: Int32

    public init(_ code: Code, path: String, call: String, errno: Int32) {
        self.code = code
        self.path = path
        self.call = call
        self.errno = errno
    }

    static func from(errno: Int32, path: String, call: String) -> FileError {
        let code: Code
        switch errno {
        case ENOENT, ENOTDIR: code = .notFound
        case EACCES, EPERM: code = .permissionDenied
        case EISDIR: code = .isDirectory
        case EMFILE, ENFILE: code = .tooManyOpenFiles
        case EIO: code = .ioError
        default: code = .other
        }
        return FileError(code, path: path, call: call, errno: errno)
    }

    public var description: String {
        let reason = errno == 0 ? "" : ": \(SystemError(call, errno: errno).reason)"
        return "FileError.\(code) '\(path)' (\(call)\(reason))"
    }
}
