#if canImport(Glibc)
import Glibc
#endif

/// Descriptors a server's accept loop holds (on `/dev/null`) so that accepting never takes the process's last ones:
/// the loop accepts only while it holds all of them, and hands them back to the process as soon as an accept fails
/// for lack of descriptors, so that the rest of the process (the Swift runtime and libdispatch, which trap when they
/// cannot open a file, a database reconnect, a log file) finds some while the loop backs off (Docs/Architecture.md,
/// "Serving").
///
/// Owned by the one task that runs the accept loop; never shared.
final class DescriptorReserve {
    let size: Int
    private var held: [Int32] = []

    /// Takes up to `size` descriptors now (fewer when the process is out of them already: ``refill()`` takes the
    /// rest later).
    init(size: Int) {
        self.size = max(0, size)
        held.reserveCapacity(self.size)
        _ = refill()
    }

    deinit { release() }

    /// Whether the reserve is whole: the loop may accept.
    var isFull: Bool { held.count == size }

    /// Takes descriptors until the reserve is whole; `false` when the process has none to give yet.
    func refill() -> Bool {
        while held.count < size {
            let fd = open("/dev/null", O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return false }
            held.append(fd)
        }
        return true
    }

    /// Hands every held descriptor back to the process.
    func release() {
        for fd in held { _ = close(fd) }
        held.removeAll(keepingCapacity: true)
    }
}
