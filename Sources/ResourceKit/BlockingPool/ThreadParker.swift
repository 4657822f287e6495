#if canImport(Glibc)
import Glibc
#endif

/// A pthread mutex + condition variable pair, for the blocking pool's own threads only (never the
/// cooperative pool).
///
/// `@unchecked Sendable`: the two pthread objects live in heap memory this class allocates once and frees in
/// `deinit`; every access goes through `pthread_mutex_lock`/`pthread_cond_*`, which are thread-safe by
/// definition, and the pointers themselves are immutable after `init`.
final class ThreadParker: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>

    init() {
        mutex = .allocate(capacity: 1)
        condition = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        condition.deallocate()
    }

    /// Runs `body` with the mutex held.
    func locked<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// With the mutex held: releases it, parks the thread until signalled, re-acquires it.
    func parkHoldingLock() {
        pthread_cond_wait(condition, mutex)
    }

    /// Wakes one parked thread.
    func signalOne() { pthread_cond_signal(condition) }

    /// Wakes every parked thread.
    func signalAll() { pthread_cond_broadcast(condition) }
}
