public import ResourceKit

/// Stops a server's work for a cancelled operation with a command sent on *another* connection (Redis's
/// `CLIENT UNBLOCK`, a `KILL QUERY`, `pg_cancel_backend`), and keeps the operation's own connection in a known state
/// until the server has stopped (Docs/Architecture.md, "Stopping work on a server").
///
/// One per connection that runs one operation at a time. ``run(boundTo:stop:drain:_:)`` wraps each operation:
/// - **One user at a time.** The operation first takes the connection's `ExclusiveLease`; while the drain of an
///   earlier cancelled operation holds it, the next operation waits (cancellably) for the drain to settle.
/// - **Re-sent until the reply shows the stop.** A cancel calls `stop` on a task this object owns, at once and
///   again every ``Configuration/resendEvery`` until the cancelled operation's reply has been read: a stop that
///   overtook its operation (it reached the server first, and found nothing to stop) is sent again once the
///   operation has arrived.
/// - **The drain.** The cancelled operation returns at once with the cancel's error; `drain` then reads its late
///   reply off the connection, on a task this object owns, within ``Configuration/giveUpAfter``. The connection is
///   released when the reply was read *and* the last stop sent has been answered, so that no stop of this
///   operation can reach the next one.
/// - **Known states only.** A drain that throws or gives up leaves the connection broken: every later `run`
///   throws `ResourceKitError.Code.connectionBroken`, and the owner reconnects or closes.
///
/// Cancellation: `stop` and `drain` run on this object's tasks, never on the caller's, and are awaited by
/// ``close()``.
public final class ServerStop: Sendable {
    /// How often a stop is sent, and for how long.
    public struct Configuration: Sendable {
        /// The pause between two sends of the same stop while its operation's reply has not been read.
        public var resendEvery: Duration = .milliseconds(10)
        /// The longest a drain may take, from its start: past it the drain is cancelled and the connection is
        /// broken.
        public var giveUpAfter: Duration = .seconds(2)

        public init() {}
    }

    /// The settings this object was made with.
    public let configuration: Configuration
    private let lease = ExclusiveLease()
    /// The decisions, and the current operation's stop once a cancel requested one: made then, not for every
    /// operation, since most are never cancelled.
    private let state = Locked<(machine: ServerStopStateMachine, stop: StopAttempt?)>((ServerStopStateMachine(), nil))
    private let work = OwnedTasks()

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// `true` while an operation or the drain of a cancelled one holds the connection.
    public var isBusy: Bool { lease.isHeld }

    /// `true` once a drain failed: the connection's state on the server is unknown.
    public var isBroken: Bool { state.withLock { $0.machine.state == .broken } }

    /// Runs `body`, one operation on the connection, as described above.
    ///
    /// - Parameters:
    ///   - handle: the resource the operation belongs to: a cancel of it, its scope or the scope's deadline
    ///     cancels the operation (and the wait for the lease), as the task's cancel does.
    ///   - stop: sends the command that stops the operation's work on the server, on another connection, and
    ///     returns when the server answered it (or the send failed). Called on this object's task, once per
    ///     ``Configuration/resendEvery`` while the stop is owed; it must be harmless when there is nothing to stop.
    ///   - drain: reads and discards what the server still sends for the cancelled operation (its reply, which
    ///     shows that it stopped), before the given deadline; throws if it cannot. Called at most once, on this
    ///     object's task, after `body` threw with the stop requested.
    ///   - body: the operation: sends its request and reads its reply, with its waits bound to `handle`.
    /// - Throws: what `body` throws; `ResourceKitError.Code.connectionBroken` when an earlier drain failed;
    ///   `ResourceKitError.Code.serverStopClosed` after ``close()``.
    ///
    /// Cancellation: a cancel while waiting for the lease throws at once. A cancel while `body` runs starts the
    /// stop's sends (from the cancel path, without blocking); `body`'s waits end at once, and the call returns with
    /// the cancel's error without waiting for the server.
    public func run<Result>(
        boundTo handle: ResourceHandle?,
        stop: @escaping @Sendable () async -> Void,
        drain: @escaping @Sendable (_ deadline: ContinuousClock.Instant) async throws -> Void,
        _ body: () async throws -> Result
    ) async throws -> Result {
        try await lease.acquire(boundTo: handle)
        let operation: ServerStopStateMachine.Operation
        switch state.withLock({ $0.machine.begin() }) {
        case .success(let begun): operation = begun
        case .failure(let error):
            lease.release()
            throw error == .broken
                ? ResourceKitError(.connectionBroken, "an earlier cancelled operation's reply could not be drained")
                : ResourceKitError(.serverStopClosed, "the connection's server stop was closed")
        }
        let outcome: Swift.Result<Result, any Error>
        do {
            outcome = .success(
                try await withResourceOperation(
                    boundTo: handle,
                    onCancel: { _ in
                        self.cancelRequested(operation, stop: stop)
                    },
                    body))
        } catch {
            outcome = .failure(error)
        }
        let threw: Bool
        if case .failure = outcome { threw = true } else { threw = false }
        let (action, attempt) = state.withLock { state in
            defer { state.stop = nil }
            return (state.machine.ended(operation, threw: threw), state.stop)
        }
        switch (action, attempt) {
        case (.release, _), (_, nil):  // a stop is requested (and its attempt made) under the same lock: never nil
            lease.release()
        case (.settle, let attempt?):
            attempt.replyRead.set()
            work.start { await self.settle(operation, clean: true, after: attempt.sendsEnded) }
        case (.drain, let attempt?):
            let deadline = ContinuousClock.now + configuration.giveUpAfter
            work.start {
                var clean = true
                do {
                    try await drain(deadline)
                } catch {
                    clean = false
                }
                attempt.replyRead.set()
                await self.settle(operation, clean: clean, after: attempt.sendsEnded)
            }
        }
        return try outcome.get()
    }

    /// From the cancel path: starts the stop's sends the first time `operation` is cancelled.
    private func cancelRequested(
        _ operation: ServerStopStateMachine.Operation, stop: @escaping @Sendable () async -> Void
    ) {
        let attempt = state.withLock { state -> StopAttempt? in
            guard state.machine.cancelRequested(operation) else { return nil }
            state.stop = StopAttempt()
            return state.stop
        }
        guard let attempt else { return }
        let replyRead = attempt.replyRead
        let every = configuration.resendEvery
        let giveUp = ContinuousClock.now + configuration.giveUpAfter
        work.start {
            while true {
                await stop()
                guard !replyRead.isSet, self.state.withLock({ $0.machine.stopOwed(operation) }) else { break }
                guard ContinuousClock.now < giveUp else { break }
                // The pause is the subject here (a stop that overtook its operation is repeated after it), not a
                // wait for an event: the reply's arrival ends it early.
                try? await replyRead.wait(deadline: min(ContinuousClock.now + every, giveUp))
                if replyRead.isSet { break }
            }
            attempt.sendsEnded.set()
        }
    }

    /// The drain ended: once the last stop sent was answered, the connection is released (or left broken).
    private func settle(_ operation: ServerStopStateMachine.Operation, clean: Bool, after sendsEnded: OneShotEvent)
        async
    {
        try? await sendsEnded.wait(shielded: true)
        state.withLock { $0.machine.settled(operation, clean: clean) }
        lease.release()
    }

    /// Ends the object: no operation begins after it; a drain under way goes on to its end (bounded by
    /// ``Configuration/giveUpAfter``) and so do the stop's sends; returns when they ended.
    public func close() async {
        state.withLock { $0.machine.close() }
        await work.waitForAll()
    }
}

/// One cancelled operation's stop: its reply was read (the sends end), and its last send was answered.
private final class StopAttempt: Sendable {
    let replyRead = OneShotEvent()
    let sendsEnded = OneShotEvent()
}
