public import ResourceKit
#if canImport(Glibc)
import Glibc
#endif

/// A file descriptor owned by one resource, closed exactly once, and never used after that.
///
/// The hazard it removes: an adapter's `cancel()` (any thread) calls `shutdown(fd)` just after `close()`
/// released the descriptor and another thread's `open` got the same number: the shutdown would hit a stranger.
/// Every use goes through ``withDescriptor(_:)`` under a lock that ``close()`` also takes, so a descriptor
/// number is only ever used while it is still ours.
///
/// ``perform(_:boundTo:deadline:_:)`` is the loop every non-blocking adapter needs: try the call; on `EAGAIN`
/// wait for readiness through the reactor (cancellable); try again.
public final class GuardedDescriptor: Sendable, CustomStringConvertible, DescriptorHolder {
    /// The reactor that waits for this descriptor.
    public let reactor: IOReactor
    private let state: Locked<Int32?>

    /// Takes ownership of `fd` (which should be non-blocking for ``perform(_:boundTo:deadline:_:)``).
    public init(_ fd: Int32, reactor: IOReactor = .shared) {
        self.reactor = reactor
        self.state = Locked(fd)
    }

    deinit {
        // Owned and never closed: close it rather than leak it.
        if let fd = state.withLock({ $0 }) {
            reactor.descriptorWillClose(fd)
            Syscall.close(fd)
        }
    }

    public var description: String { "GuardedDescriptor(\(isClosed ? "closed" : "open"))" }

    /// `true` once ``close()`` ran.
    var isClosed: Bool { state.withLock { $0 == nil } }

    /// Runs `body` with the descriptor, holding the guard's lock: `body` must not block (a non-blocking
    /// syscall is fine).
    /// - Throws: `ResourceKitError.Code.descriptorClosed` if the descriptor was closed, or what `body` threw.
    public func withDescriptor<T>(_ body: (Int32) throws -> T) throws -> T {
        try state.withLock { fd in
            guard let fd else {
                throw ResourceKitError(.descriptorClosed, "the descriptor was already closed")
            }
            return try body(fd)
        }
    }

    /// Runs `body` with the descriptor if it is still open; does nothing otherwise. Meant for `cancel()`
    /// (`shutdown(2)`, a signal), which must not throw.
    public func ifOpen(_ body: (Int32) -> Void) {
        state.withLock { fd in
            if let fd { body(fd) }
        }
    }

    /// Repeats `attempt` until it returns a value, waiting for `interest` whenever it returns `nil`
    /// (the call would block: `EAGAIN`).
    ///
    /// Cancellation: every call is a checkpoint: in a task or for a handle that is already cancelled it throws
    /// before `attempt` runs (no byte is written or consumed). The wait is bound to `handle` (its task, scope
    /// and deadline) and `deadline`; a cancelled wait throws `CancellationError` or `DeadlineExceededError`
    /// at once. `attempt` runs under the guard's lock and must not block.
    @discardableResult
    public func perform<T>(
        _ interest: IOInterest,
        boundTo handle: ResourceHandle?,
        deadline: ContinuousClock.Instant? = nil,
        _ attempt: (Int32) throws -> T?
    ) async throws -> T {
        while true {
            try handle?.checkCancellation()
            try Task.checkCancellation()
            let (result, fd) = try withDescriptor { fd in (try attempt(fd), fd) }
            if let result { return result }
            // Registered only while the descriptor is still ours: a `close()` after the attempt cannot leave the
            // wait on a stranger's descriptor (Docs/Architecture.md, "Descriptors that close under a wait").
            try await reactor.wait(for: fd, interest, heldBy: self, boundTo: handle, deadline: deadline)
        }
    }

    private enum Received {
        case bytes([UInt8])
        case end
    }

    /// Reads at most `maxBytes` (at least one) with `read(2)`, waiting through the reactor while nothing is
    /// available; `nil` at the end of the stream. The building block of stream adapters' `receive(upTo:)`.
    ///
    /// Cancellation: as ``perform(_:boundTo:deadline:_:)``.
    /// - Parameters:
    ///   - maxBytes: the most bytes to return.
    ///   - handle: the resource the wait is bound to (its task, scope and deadline cancel it).
    ///   - deadline: a deadline for this read alone (`DeadlineExceededError`).
    ///   - failure: turns an `errno` other than `EAGAIN`/`EINTR` into the adapter's typed error.
    public func readSome(
        upTo maxBytes: Int,
        boundTo handle: ResourceHandle?,
        deadline: ContinuousClock.Instant? = nil,
        failure: (Int32) -> any Error
    ) async throws -> [UInt8]? {
        let count = max(1, maxBytes)
        let received = try await perform(.readable, boundTo: handle, deadline: deadline) { fd -> Received? in
            var buffer = [UInt8](repeating: 0, count: count)
            let read: Int?
            do {
                read = try Syscall.nonBlocking("read") {
                    buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, count) }
                }
            } catch let error as SystemError {
                throw failure(error.errno)
            }
            guard let n = read else { return nil }
            if n == 0 { return .end }
            buffer.removeLast(count - n)
            return .bytes(buffer)
        }
        switch received {
        case .bytes(let bytes): return bytes
        case .end: return nil
        }
    }

    /// Runs `body` under the guard's lock if the descriptor is still open as `fd`; `false`, having run nothing,
    /// once it was closed (see ``DescriptorHolder``).
    public func whileHeld(_ fd: Int32, _ body: () -> Void) -> Bool {
        state.withLock { current in
            guard current == fd else { return false }
            body()
            return true
        }
    }

    /// Closes the descriptor once: its reactor waiters fail with `ResourceKitError.Code.descriptorClosed`,
    /// then `close(2)` runs (never retried). Returns `false` if it was already closed.
    @discardableResult
    public func close() -> Bool {
        let fd = state.withLock { fd -> Int32? in
            defer { fd = nil }
            return fd
        }
        guard let fd else { return false }
        reactor.descriptorWillClose(fd)
        Syscall.close(fd)
        return true
    }
}
