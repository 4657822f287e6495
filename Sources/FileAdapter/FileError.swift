import ResourceKit

#if canImport(Glibc)
import Glibc
#endif

/// A file failure, naming the path the caller gave (the caller's own input; it is never logged by
/// ResourceKit) and the `errno`.
public struct FileError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable, Hashable {
        case notFound
        case permissionDenied
        case isDirectory
        /// A regular file was given where a stream (pipe, FIFO, device) was expected: use ``FileReader``.
        case notAStream
        /// A pipe, FIFO or device was given where a regular file was expected: use ``StreamReader``.
        case notARegularFile
        case tooManyOpenFiles
        case ioError
        case other
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
        return "FileError.\(code.rawValue) '\(path)' (\(call)\(reason))"
    }
}
