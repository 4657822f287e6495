import Synchronization

/// The lock around the state of an object made on the hot paths (a cancellation cell per wait, a scope and a handle per
/// request), and around the registry's ledger (taken at every registration and close). Debug and release builds hold it
/// inline in the object (`Synchronization.Mutex`): the object is then one allocation, not two (the object and a
/// ``Locked``'s storage). The sanitizer passes (`RESOURCEKIT_CHECKED_SYNCHRONIZATION`, as for ``WaiterContinuation``)
/// use ``Locked``, the pthread mutex the thread sanitizer sees (it cannot see `Mutex`'s futex and would report a race
/// on every use). Both are used the same way (`init(_:)`, `withLock`) and under the same rule: decide under the lock,
/// act after it. Decided here only (Docs/Architecture.md, "State machines and their owners").
#if RESOURCEKIT_CHECKED_SYNCHRONIZATION
typealias InlineStateLock<Value> = Locked<Value>
#else
typealias InlineStateLock<Value> = Mutex<Value>
#endif
