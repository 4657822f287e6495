/// Runs `body` shielded from the calling task's cancellation and, if `timeout` is given, bounded by it: the
/// library's one cancellation shield, for cleanup that must run to the end even when the task that triggers
/// it is being cancelled (closing a resource, waiting for owned work to stop, a final rollback).
///
/// ```swift
/// // in a request handler that may be cancelled at any moment:
/// try await withCancellationShield(timeout: .seconds(2)) {
///     try await connection.rollback()
/// }
/// ```
///
/// Cancellation: cancelling the calling task does not reach `body` (it runs on a task of its own, which the
/// shield owns and awaits). The call returns when `body` returns, or throws ``ShieldTimeoutError`` when
/// `timeout` passes first; `body` then keeps running to its end unobserved, so the caller must report it
/// (``ResourceHandle/close()`` reports it as a `closeTimedOut` leak).
/// - Throws: what `body` threw, or ``ShieldTimeoutError``.
public func withCancellationShield<Value: Sendable>(
    timeout: Duration? = nil,
    _ body: @escaping @Sendable () async throws -> Value
) async throws -> Value {
    let cell = CancellationCell<Value>()
    let deadline = timeout.map { ContinuousClock.now + $0 }
    do {
        return try await cell.run(deadline: deadline, shielded: true) { cell in
            // Owner: this shield. It awaits the task through `cell`; past the timeout the task is abandoned
            // and the caller reports it (the error below).
            // The body belongs to the shield, not to the caller's scope or operation (their cancel must not reach
            // it), so it runs without them.
            Task {
                cell.complete(await withoutResourceScope { await Result { try await body() } })
            }
        }
    } catch is DeadlineExceededError where cell.cancellationReason != nil {
        throw ShieldTimeoutError(timeout: timeout ?? .zero)
    }
}

/// A shielded body overran its timeout (``withCancellationShield(timeout:_:)``). The body was abandoned and
/// may still be running.
public struct ShieldTimeoutError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The timeout that passed.
    public let timeout: Duration

    public var description: String { "shielded work overran its timeout of \(timeout)" }
}

extension Result where Failure == any Error {
    /// Catches an async body's error into a result.
    init(catching body: () async throws -> Success) async {
        do {
            self = .success(try await body())
        } catch {
            self = .failure(error)
        }
    }
}
