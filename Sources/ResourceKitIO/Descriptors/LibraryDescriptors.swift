import ResourceKit
#if canImport(Glibc)
import Glibc
#endif

/// Descriptors a C library opens and closes itself (libcurl's sockets, c-ares's, librdkafka's), tracked without
/// owning them, so that a cancel can shut them down and a wait can register on them without ever touching a number
/// the library has given back (Docs/Architecture.md, "Descriptors that close under a wait").
///
/// Wire it to the library's own hooks: ``insert(_:)`` from its "socket opened" callback, ``remove(_:)`` (or
/// ``close(_:)``, which also closes) from its "socket closing" callback, *before* the descriptor is closed. Then
/// ``shutdownAll()`` is the adapter's `onCancel` or `cancel()`: it runs under the set's lock, which a removal also
/// takes, so it shuts down exactly the descriptors the library still holds. A number the library closed without
/// telling the set cannot be protected: every descriptor it opens must go through the hooks.
public final class LibraryDescriptors: Sendable, DescriptorHolder {
    /// The reactor whose waits on these descriptors a removal fails (``IOReactor/descriptorWillClose(_:)``).
    public let reactor: IOReactor
    private let held = Locked<Set<Int32>>([])

    public init(reactor: IOReactor = .shared) {
        self.reactor = reactor
    }

    /// The library opened `fd`. Idempotent.
    public func insert(_ fd: Int32) {
        held.withLock { _ = $0.insert(fd) }
    }

    /// The library is about to close `fd`: it leaves the set (a later ``shutdownAll()`` does not touch the number),
    /// and reactor waits on it fail with `ResourceKitError.Code.descriptorClosed`. Returns `false` if the set did
    /// not hold it.
    @discardableResult
    public func remove(_ fd: Int32) -> Bool {
        guard held.withLock({ $0.remove(fd) != nil }) else { return false }
        reactor.descriptorWillClose(fd)
        return true
    }

    /// ``remove(_:)``, then `close(2)` (never retried): for a library whose close hook closes the descriptor itself.
    /// Returns `false`, closing nothing, if the set did not hold it.
    @discardableResult
    public func close(_ fd: Int32) -> Bool {
        guard remove(fd) else { return false }
        Syscall.close(fd)
        return true
    }

    /// For a library with no socket hooks (hiredis, an SDK that reconnects inside its own calls): right after each
    /// call into the library, hand over the one descriptor the library reports now (`nil`: none). A number the set
    /// held that is not `fd` leaves it (its reactor waits fail with `ResourceKitError.Code.descriptorClosed`), and
    /// `fd` enters it.
    ///
    /// The window, which hooks close and this cannot: between the library closing its old socket inside a call and
    /// the refresh after that call, the set still holds the old number. A ``shutdownAll()`` in that window may shut
    /// down whatever reused the number, and the refresh fails any reactor wait on it. Keep it short: refresh after
    /// every call that may reconnect, on the thread that made the call, before waiting on anything.
    public func refresh(current fd: Int32?) {
        let gone = held.withLock { held -> [Int32] in
            let gone = held.filter { $0 != fd }
            held = fd.map { [$0] } ?? []
            return Array(gone)
        }
        for old in gone { reactor.descriptorWillClose(old) }
    }

    /// Shuts down (`SHUT_RDWR`) every descriptor the library holds now: its peers see the connection end and its
    /// waits wake. For `onCancel` and `cancel()`: synchronous, non-blocking, idempotent, any thread. The descriptors
    /// stay open and in the set; the library closes them through its hooks. Returns how many it shut down.
    @discardableResult
    public func shutdownAll() -> Int {
        held.withLock { held in
            for fd in held { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
            return held.count
        }
    }

    /// The descriptors the library holds now (for a leak check: after the library's cleanup, none).
    public var descriptors: [Int32] { held.withLock { $0.sorted() } }

    /// Runs `body` while the library still holds `fd`, under the set's lock (see ``DescriptorHolder``).
    public func whileHeld(_ fd: Int32, _ body: () -> Void) -> Bool {
        held.withLock { held in
            guard held.contains(fd) else { return false }
            body()
            return true
        }
    }
}
