/// The continuation a waiter that is resumed exactly once suspends on: a cell's waiter, the Postgres pool's queued
/// lease. The state machine that owns it resumes it once, so it is an unsafe continuation: a checked one allocates a
/// second object per wait (its canary) and frees it again. Debug and release builds alike use it, so the test suite
/// runs what ships. The sanitizer passes (`Scripts/test --sanitize=thread|address`) define
/// `RESOURCEKIT_CHECKED_SYNCHRONIZATION` and get the checked one: it traps on a resume the machine should have made
/// impossible, and the thread sanitizer sees the resume happen before the resumed task runs (with an unsafe one it
/// reports a race on every wait). Decided here only, for every module (Docs/Architecture.md, "State machines and
/// their owners").
#if RESOURCEKIT_CHECKED_SYNCHRONIZATION
@usableFromInline package typealias WaiterContinuation<T> = CheckedContinuation<T, any Error>
#else
@usableFromInline package typealias WaiterContinuation<T> = UnsafeContinuation<T, any Error>
#endif

/// Suspends the caller on a ``WaiterContinuation`` handed to `body`, which must arrange for it to be resumed exactly
/// once.
@inlinable
package func suspendOnWaiter<T>(_ body: (WaiterContinuation<T>) -> Void) async throws -> T {
    #if RESOURCEKIT_CHECKED_SYNCHRONIZATION
    try await withCheckedThrowingContinuation(body)
    #else
    try await withUnsafeThrowingContinuation(body)
    #endif
}
