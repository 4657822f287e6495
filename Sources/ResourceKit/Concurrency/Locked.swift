#if canImport(Glibc)
// Public: the lock's hot path is `@inlinable`, so that the modules above the core (the I/O runtime, the
// adapters) get it specialised and inlined; it calls pthread from there.
public import Glibc
#endif

/// A value guarded by a `pthread_mutex_t`: ResourceKit's one lock type, public so that adapters (ours and
/// third parties) share the one lock that ThreadSanitizer understands.
///
/// ResourceKit uses it instead of `Synchronization.Mutex` because ThreadSanitizer on Linux cannot see
/// `Mutex`'s futex-based synchronisation and reports every guarded access as a race, which would make the
/// sanitizer pass worthless; it does intercept `pthread_mutex_lock`.
///
/// `Locked` is a reference: copies share the value and the mutex. The value and the mutex live in one heap
/// allocation.
///
/// `@unchecked Sendable`: the only stored property is a reference to a `LockedStorage` (not `Sendable`
/// itself, as `ManagedBuffer` never is), whose value is only read or written inside `withLock`/`wait`,
/// between `pthread_mutex_lock` and `pthread_mutex_unlock` on the mutex in the same object, which is
/// initialised before the reference is shared and destroyed after the last one is gone. `Value: Sendable`
/// keeps non-Sendable state from escaping through `withLock`'s result.
///
/// The rule for every caller: decide under the lock, act after it. Never resume a continuation, start a task,
/// publish an event, call adapter code or make a system call that may block inside ``withLock(_:)``.
public struct Locked<Value: Sendable>: @unchecked Sendable {
    @usableFromInline let storage: LockedStorage<Value>

    /// Creates the lock around `value`.
    @inlinable
    public init(_ value: Value) {
        storage = LockedStorage.make(value, withCondition: false)
    }

    /// Creates the lock with a condition variable, for ``waitWithLock(until:)``: only for dedicated threads
    /// (the blocking pool's), never the cooperative pool.
    package init(_ value: Value, withCondition: Bool) {
        storage = LockedStorage.make(value, withCondition: withCondition)
    }

    /// Runs `body` with exclusive access to the value.
    @inlinable
    public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try storage.withLock(body)
    }

    /// With the lock: blocks the calling thread until `take` returns a result, releasing the lock while
    /// parked. Requires `init(_:withCondition: true)`; for dedicated threads only.
    package func waitWithLock<Result>(until take: (inout Value) -> Result?) -> Result {
        storage.wait { value in take(&value).map { .done($0) } ?? .sleep(until: nil) }
    }

    /// With the lock: runs `step` until it returns `.done`, parking the calling thread between runs until
    /// signalled or until the instant a `.sleep` names. Requires `init(_:withCondition: true)`; for dedicated
    /// threads only (the deadline timers' thread).
    package func waitWithLock<Result>(_ step: (inout Value) -> LockedWaitStep<Result>) -> Result {
        storage.wait(step)
    }

    /// With the lock: runs `body`, then wakes one thread parked in ``waitWithLock(until:)`` (or all of them).
    /// With the lock: runs `body`, then wakes one parked thread if `body` says so.
    package func withLockSignalling<Result>(when body: (inout Value) -> (result: Result, signal: Bool)) -> Result {
        storage.withLock { value in
            let (result, signal) = body(&value)
            if signal { storage.signal(all: false) }
            return result
        }
    }

    package func withLockSignalling<Result>(
        all: Bool = false, _ body: (inout Value) throws -> Result
    ) rethrows -> Result {
        try storage.withLock { value in
            defer { storage.signal(all: all) }
            return try body(&value)
        }
    }
}

/// The header of a `LockedStorage`: the pthread objects, in a type that does not depend on the value's, so that
/// the storage's unspecialised code (its `deinit`, the condition waits) finds the value and the mutex without
/// looking up generic metadata at run time (a hash-table lookup on every lock freed; Docs/Decisions/0006).
@usableFromInline
struct LockWords {
    @usableFromInline var mutex = pthread_mutex_t()
    /// Only for ``Locked/init(_:withCondition:)`` with `true`: a separate allocation, so that a plain lock does
    /// not pay for one.
    @usableFromInline let condition: UnsafeMutablePointer<pthread_cond_t>?

    @usableFromInline
    init(condition: UnsafeMutablePointer<pthread_cond_t>?) {
        self.condition = condition
    }

    /// The mutex inside the header `words` points to (its first stored property, at offset 0): one way to reach
    /// it, for every pthread call.
    @inlinable
    static func mutex(_ words: UnsafeMutablePointer<LockWords>) -> UnsafeMutablePointer<pthread_mutex_t> {
        UnsafeMutableRawPointer(words).assumingMemoryBound(to: pthread_mutex_t.self)
    }
}

/// What a ``Locked/waitWithLock(_:)`` step decided: finish with a result, or park until signalled (`nil`) or
/// until an instant, then run the step again.
package enum LockedWaitStep<Result> {
    case done(Result)
    case sleep(until: ContinuousClock.Instant?)
}

/// The heap object behind ``Locked``: the pthread objects in the header, the value as the one tail element.
/// Shared across threads only through ``Locked`` (see its `@unchecked Sendable` note).
@usableFromInline
final class LockedStorage<Value>: ManagedBuffer<LockWords, Value> {
    @inlinable
    static func make(_ value: Value, withCondition: Bool) -> LockedStorage<Value> {
        var condition: UnsafeMutablePointer<pthread_cond_t>?
        if withCondition {
            let made = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
            made.initialize(to: pthread_cond_t())
            // Timed waits measure against CLOCK_MONOTONIC, which wall-clock changes do not move.
            var attributes = pthread_condattr_t()
            pthread_condattr_init(&attributes)
            pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
            pthread_cond_init(made, &attributes)
            pthread_condattr_destroy(&attributes)
            condition = made
        }
        let storage = unsafeDowncast(
            create(minimumCapacity: 1) { _ in LockWords(condition: condition) }, to: LockedStorage<Value>.self)
        storage.withUnsafeMutablePointers { words, element in
            pthread_mutex_init(LockWords.mutex(words), nil)
            element.initialize(to: value)
        }
        return storage
    }

    deinit {
        withUnsafeMutablePointers { words, element in
            _ = element.deinitialize(count: 1)
            if let condition = words.pointee.condition {
                pthread_cond_destroy(condition)
                condition.deallocate()
            }
            pthread_mutex_destroy(LockWords.mutex(words))
        }
    }

    @inlinable
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try withUnsafeMutablePointers { words, value in
            let mutex = LockWords.mutex(words)
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            return try body(&value.pointee)
        }
    }

    func wait<Result>(_ step: (inout Value) -> LockedWaitStep<Result>) -> Result {
        withUnsafeMutablePointers { words, value in
            guard let condition = words.pointee.condition else {
                preconditionFailure("Locked: waitWithLock needs init(_:withCondition: true)")
            }
            let mutex = LockWords.mutex(words)
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            while true {
                switch step(&value.pointee) {
                case .done(let result):
                    return result
                case .sleep(until: nil):
                    pthread_cond_wait(condition, mutex)
                case .sleep(until: let instant?):
                    let remaining = instant - .now
                    guard remaining > .zero else { continue }
                    var wake = timespec()
                    clock_gettime(CLOCK_MONOTONIC, &wake)
                    let (seconds, attoseconds) = remaining.components
                    let nanoseconds = Int(wake.tv_nsec) + Int(attoseconds / 1_000_000_000) + 1
                    wake.tv_sec += Int(seconds) + nanoseconds / 1_000_000_000
                    wake.tv_nsec = nanoseconds % 1_000_000_000
                    pthread_cond_timedwait(condition, mutex, &wake)
                }
            }
        }
    }

    func signal(all: Bool) {
        guard let condition = withUnsafeMutablePointerToHeader({ $0.pointee.condition }) else { return }
        if all {
            pthread_cond_broadcast(condition)
        } else {
            pthread_cond_signal(condition)
        }
    }
}
