import Glibc
import ResourceKit
import ResourceKitIO

/// A FIFO in /tmp with a writer that stays open and silent: reads on it block until cancelled.
package final class SilentFIFO {
    package let path: String
    private let writer: Int32

    package init(name: String) throws {
        path = "/tmp/resource-demo-\(name)-\(getpid()).fifo"
        unlink(path)
        guard mkfifo(path, 0o600) == 0 else { throw SystemError.current("mkfifo") }
        writer = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)
    }

    deinit {
        Syscall.close(writer)
        unlink(path)
    }
}
