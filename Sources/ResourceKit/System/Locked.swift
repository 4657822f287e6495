#if canImport(Glibc)
import Glibc
#endif

/// A value guarded by a `pthread_mutex_t`. Public so that adapters (ours and third parties) share the one
/// lock that ThreadSanitizer understands.
///
/// ResourceKit uses it instead of `Synchronization.Mutex` because ThreadSanitizer on Linux cannot see
/// `Mutex`'s futex-based synchronisation and reports every guarded access as a race, which would make the
/// sanitizer pass worthless; it does intercept `pthread_mutex_lock`.
///
/// `@unchecked Sendable`: `value` is only read or written inside `withLock`, between `pthread_mutex_lock` and
/// `pthread_mutex_unlock` on a mutex this object allocates in `init` and destroys in `deinit`; the pointer
/// itself is immutable. `Value: Sendable` keeps non-Sendable state from escaping through `withLock`'s result.
public final class Locked<Value: Sendable>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    /// Creates the lock around `value`.
    public init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value. Never resume a continuation or call out to adapter
    /// code inside `body`: decide under the lock, act after it.
    public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
