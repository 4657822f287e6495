@_spi(Testing) import ResourceKit
import ResourceKitTesting
import TestSupport
import Testing

/// `ResourceOperationToken`: the body's view of its operation, marked cancelled before the operation's `onCancel`
/// runs, so that a send checked under a lock that `onCancel` also takes is either refused or seen by the hook.
@Suite struct ResourceOperationTokenTests {
    @Test func thereIsNoTokenOutsideAnOperationAndAFreshOneIsNotCancelled() async throws {
        #expect(ResourceOperationToken.current == nil)
        try await withResourceOperation(boundTo: nil, onCancel: { _ in }) {
            let token = try #require(ResourceOperationToken.current)
            #expect(!token.isCancelled && token.cancellationReason == nil)
        }
    }

    /// The order the token promises: `onCancel` finds the operation already marked.
    @Test func theMarkComesBeforeTheHook() async throws {
        let token = Locked<ResourceOperationToken?>(nil)
        let seenByHook = Locked<Bool?>(nil)
        let started = OneShotEvent()
        // Owner: this test, which cancels and awaits it.
        let operation = Task {
            try await withResourceOperation(
                boundTo: nil, onCancel: { _ in seenByHook.withLock { $0 = token.withLock { $0 }?.isCancelled } }
            ) {
                token.withLock { $0 = ResourceOperationToken.current }
                started.set()
                try await OneShotEvent().wait()
            }
        }
        try await started.wait()
        operation.cancel()
        await #expect(throws: CancellationError.self) { try await operation.value }
        #expect(seenByHook.withLock { $0 } == true)
        #expect(token.withLock { $0 }?.cancellationReason == .cancelled)
    }

    /// The adapter's pattern, many times over: a send checked under a lock, and a hook under the same lock. Every
    /// send that happened is seen by the hook; none happens after the hook.
    @Test func aSendCheckedUnderTheHooksLockIsRefusedOrSeen() async throws {
        for _ in 0..<300 {
            let sends = Locked((sent: false, stopped: false, sentAfterStop: false))
            let started = OneShotEvent()
            // Owner: this test, which cancels and awaits it.
            let operation = Task {
                try await withResourceOperation(
                    boundTo: nil,
                    onCancel: { _ in sends.withLock { if $0.sent { $0.stopped = true } } }
                ) {
                    let token = ResourceOperationToken.current
                    started.set()
                    for _ in 0..<Int.random(in: 0...3) { await Task.yield() }
                    try sends.withLock { sends in
                        if token?.isCancelled == true { throw CancellationError() }
                        sends.sent = true
                        if sends.stopped { sends.sentAfterStop = true }
                    }
                    try await OneShotEvent().wait()
                }
            }
            // The cancel lands anywhere between the body's start and its send, or after the send.
            try await started.wait()
            for _ in 0..<Int.random(in: 0...3) { await Task.yield() }
            operation.cancel()
            _ = try? await operation.value
            let outcome = sends.withLock { $0 }
            #expect(!outcome.sent || outcome.stopped, "a send happened and the hook did not see it")
            #expect(!outcome.sentAfterStop)
        }
    }
}
