public import ResourceKit

/// One descriptor a driven library wants to hear about in this turn of its loop (libcurl's `CURLMOPT_SOCKETFUNCTION`
/// tells which, and it changes between turns).
public struct LoopInterest: Sendable, Hashable {
    public var fd: Int32
    public var interest: IOInterest

    public init(_ fd: Int32, _ interest: IOInterest) {
        self.fd = fd
        self.interest = interest
    }
}

/// What ended one turn of a driven library's loop.
public enum LoopWake: Sendable, Equatable {
    /// This descriptor is ready (others may be too: they answer at once on the next turn, readiness is level-
    /// triggered).
    case ready(fd: Int32, IOEvents)
    /// The library's own timer passed first (libcurl's `CURLMOPT_TIMERFUNCTION`): not an error.
    case timer
}

extension IOReactor {
    /// One turn of the event loop of a C library that must be driven (libcurl's multi interface, c-ares,
    /// nghttp2, libssh2, librdkafka): waits until any of `interests` is ready or the library's `timer` passes,
    /// whichever comes first. Call it again with what the library wants next; `interests` may change every turn.
    ///
    /// The descriptors are usually the library's own: pass the ``LibraryDescriptors`` its hooks fill as `holder`,
    /// and each wait registers only while the library still holds its descriptor (a number it closed and a
    /// stranger got is never waited on; Docs/Architecture.md, "Descriptors that close under a wait").
    ///
    /// Cancellation: bound to `handle` (its task, owning and borrowing scopes, the scope's deadline) and to
    /// `deadline` like any reactor wait: a cancel wakes the turn at once with `CancellationError` (or
    /// `DeadlineExceededError`) and leaves nothing registered. A checkpoint first: in a cancelled task or on a
    /// cancelled handle it throws before registering anything. The library's `timer` is not a deadline: it ends the
    /// turn with ``LoopWake/timer``.
    ///
    /// Each descriptor waits in a child task of its own (a turn with one descriptor and no timer waits inline), so
    /// a turn costs a task per descriptor; a library loop turns per event, not per byte.
    /// - Throws: `CancellationError`, `DeadlineExceededError`, `ResourceKitError` (`nothingToWaitFor` for no
    ///   descriptor and no timer; `descriptorClosed`, `badDescriptor`, `notPollable`, `reactorUnavailable` from a
    ///   descriptor's wait).
    public func waitForAny(
        _ interests: [LoopInterest],
        heldBy holder: (any DescriptorHolder)? = nil,
        timer: ContinuousClock.Instant? = nil,
        boundTo handle: ResourceHandle? = nil,
        deadline: ContinuousClock.Instant? = nil
    ) async throws -> LoopWake {
        try handle?.checkCancellation()
        try Task.checkCancellation()
        var unique = Set<LoopInterest>()
        let interests = interests.filter { unique.insert($0).inserted }
        if interests.isEmpty, timer == nil {
            throw ResourceKitError(.nothingToWaitFor, "a driven loop's wait named no descriptor and no timer")
        }
        if let timer, timer <= .now { return .timer }
        if interests.count == 1, timer == nil, let only = interests.first {
            return .ready(fd: only.fd, try await waitOne(only, heldBy: holder, boundTo: handle, deadline: deadline))
        }
        return try await withThrowingTaskGroup(of: LoopWake.self) { group in
            for wanted in interests {
                group.addTask {
                    .ready(
                        fd: wanted.fd,
                        try await self.waitOne(wanted, heldBy: holder, boundTo: handle, deadline: deadline))
                }
            }
            if let timer {
                group.addTask {
                    try await Self.libraryTimer(timer, boundTo: handle, deadline: deadline)
                    return .timer
                }
            }
            // The first to end decides the turn (a wake, the timer, or an error); the others are cancelled and
            // their waits leave the reactor before the group returns.
            defer { group.cancelAll() }
            guard let first = try await group.next() else { throw CancellationError() }
            return first
        }
    }

    private func waitOne(
        _ wanted: LoopInterest, heldBy holder: (any DescriptorHolder)?, boundTo handle: ResourceHandle?,
        deadline: ContinuousClock.Instant?
    ) async throws -> IOEvents {
        if let holder {
            return try await wait(for: wanted.fd, wanted.interest, heldBy: holder, boundTo: handle, deadline: deadline)
        }
        return try await wait(for: wanted.fd, wanted.interest, boundTo: handle, deadline: deadline)
    }

    /// The library's timer as a wait of its own: a cell the timers' thread completes at `instant`, bound to
    /// `handle` like the descriptors' waits, its timer dropped when it is cancelled.
    private static func libraryTimer(
        _ instant: ContinuousClock.Instant, boundTo handle: ResourceHandle?, deadline: ContinuousClock.Instant?
    ) async throws {
        let timerID = Locked<DeadlineTimerID?>(nil)
        try await CancellationCell<Void>().run(
            boundTo: handle, deadline: deadline,
            onCancel: { _ in
                if let id = timerID.withLock({ $0 }) { DeadlineTimers.shared.cancel(id) }
            }
        ) { cell in
            // `onCancel` runs only after this start returned, so it finds the id.
            let id = DeadlineTimers.shared.schedule(at: instant) { cell.succeed(()) }
            timerID.withLock { $0 = id }
        }
    }
}
