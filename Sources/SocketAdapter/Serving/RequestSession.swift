public import ResourceKit
public import ResourceKitIO

/// Runs a connection's requests one at a time, each in a request scope that is cancelled as soon as the peer is gone
/// (Docs/Architecture.md, "Serving"): the cancel-on-disconnect of a server, as a block.
///
/// Two tasks share the connection: a reader that reads requests ahead (so that a client that sends several before
/// reading the answers is not taken for a gone one) and an executor that runs them in order, each in
/// `withResourceScope("request")`. When the reader finds the peer gone, the executor's task is cancelled at once, and
/// with it the running request's scope: its query stops on its server, its waits throw.
///
/// ```swift
/// try await SocketServer.serve(listener) { connection, _ in
///     _ = try await RequestSession.run(on: connection) { try await $0.readLine() } handle: { line, scope in
///         try await connection.write(try await lookUp(line) + "\n")
///         return true
///     }
/// }
/// ```
///
/// The peer is gone when a read fails (a reset, `ETIMEDOUT` after ``SocketConnection/setPeerSilenceBound(_:)``),
/// when a write of the handler fails with a ``SocketError``, and, under ``HalfClose/cancels`` (the default), at
/// the end of its input.
public enum RequestSession {
    /// What the end of the client's input (a half-close, `shutdown(SHUT_WR)`, or a full close) means.
    public enum HalfClose: Sendable, Equatable {
        /// The client is gone: the running request is cancelled, queued ones are dropped, nothing more is answered.
        /// Go's `net/http` does the same (a request's context is cancelled when its connection's input ends).
        case cancels
        /// The client is done sending: every request read is answered, in order, then the session ends.
        case answersThenCloses
    }

    /// How a session ended.
    public enum Ending: Sendable, Equatable {
        /// The handler returned `false`, or the input ended under ``HalfClose/answersThenCloses`` and every request
        /// was answered.
        case finished
        /// The peer is gone; the running request (if any) was cancelled.
        case peerGone
        /// More than `maxAhead` requests were read ahead of their answers: the ones before were answered, the rest
        /// of the input was not read.
        case tooManyAhead
        /// The server's shutdown (`GracefulShutdown`) began: nothing more was read, the requests read before were
        /// answered within its grace, and a request still running when the grace expired had its scope cancelled.
        case shutDown
    }

    /// Runs the session until it ends (see ``Ending``).
    ///
    /// - Parameters:
    ///   - connection: the client's connection.
    ///   - maxAhead: requests read and not yet answered, at most (the reader stops past it: ``Ending/tooManyAhead``).
    ///   - halfClose: what the end of the client's input means (``HalfClose/cancels`` by default).
    ///   - shutdown: the shutdown the session follows (see below); by default the server's
    ///     (`GracefulShutdown.current`, bound by ``SocketServer/serve(_:configuration:handler:)``).
    ///   - read: reads the next request; `nil` at the end of input. Runs on the reader's task only. An error other
    ///     than a ``SocketError`` (a framing error, such as a line too long) stops the reading: the requests before
    ///     it are answered, then `run` throws it.
    ///   - handle: answers one request, in a scope of its own (its `ResourceScope`); `false` ends the session.
    ///
    /// Cancellation: cancelling the calling task (or its scope) cancels the running request and ends the session
    /// with `CancellationError`; the peer's disconnect cancels the running request and returns ``Ending/peerGone``.
    /// Under a `GracefulShutdown` (`shutdown`, by default the server's, `GracefulShutdown.current`), its beginning
    /// stops the reading (an idle session ends at once), and its grace's end cancels the running request's scope
    /// (with `CancellationError`: the handler may still answer, the connection is open), then the session returns
    /// ``Ending/shutDown``.
    ///
    /// Unless the peer is gone, the session ends with ``SocketConnection/endOutputAndDrain(within:)``: the client's
    /// last answers are not lost to a reset by input it sent after them.
    /// - Throws: what `read` or `handle` threw, other than a ``SocketError`` (which means the peer is gone).
    public static func run<Request: Sendable>(
        on connection: SocketConnection,
        maxAhead: Int = 64,
        halfClose: HalfClose = .cancels,
        shutdown: GracefulShutdown? = GracefulShutdown.current,
        read: @escaping @Sendable (SocketConnection) async throws -> Request?,
        handle: @escaping @Sendable (Request, ResourceScope) async throws -> Bool
    ) async throws -> Ending {
        let (items, queue) = AsyncStream<Item<Request>>.makeStream()
        let ahead = Locked(0)
        let limit = max(1, maxAhead)
        let stops = ShutdownStops()
        let ending = try await withThrowingTaskGroup(of: Ending?.self) { group in
            if let shutdown {
                group.addTask {
                    try await shutdown.waitUntilBegun()
                    stops.stopReading()
                    try await shutdown.waitUntilGraceExpires()
                    stops.stopRunning()
                    return nil
                }
            }
            group.addTask {
                defer { queue.finish() }
                while true {
                    let request: Request?
                    do {
                        // Under a shutdown each read runs in a scope of its own, which its beginning cancels.
                        request =
                            shutdown == nil
                            ? try await read(connection) : try await stops.reading { try await read(connection) }
                    } catch ShutdownStops.Stopped.reading {
                        queue.yield(.shutDown)
                        return nil
                    } catch is SocketError {
                        return .peerGone
                    } catch let error as CancellationError {
                        throw error
                    } catch {
                        queue.yield(.failed(error))
                        return nil
                    }
                    guard let request else {
                        if halfClose == .cancels { return .peerGone }
                        queue.yield(.endOfInput)
                        return nil
                    }
                    let count = ahead.withLock { count -> Int in
                        count += 1
                        return count
                    }
                    guard count <= limit else {
                        queue.yield(.tooManyAhead)
                        return nil
                    }
                    queue.yield(.request(request))
                }
            }
            group.addTask {
                for await item in items {
                    switch item {
                    case .request(let request):
                        ahead.withLock { $0 -= 1 }
                        do {
                            guard
                                let goOn = try await stops.running({ scope in try await handle(request, scope) })
                            else { return .shutDown }
                            if !goOn { return .finished }
                        } catch is SocketError {
                            return .peerGone
                        }
                    case .endOfInput: return .finished
                    case .tooManyAhead: return .tooManyAhead
                    case .shutDown: return .shutDown
                    case .failed(let error): throw error
                    }
                }
                // The reader ended without a word: it found the peer gone, and its ending is the session's.
                return nil
            }
            // The first ending decides; the other task is cancelled (a running request with it).
            while let finished = try await group.next() {
                if let ending = finished {
                    group.cancelAll()
                    return ending
                }
            }
            return .finished
        }
        // Input left unread at the close would make the kernel send a reset (Docs/Architecture.md, "Serving").
        if ending != .peerGone { await connection.endOutputAndDrain() }
        return ending
    }

    private enum Item<Request: Sendable>: Sendable {
        case request(Request)
        case endOfInput
        case tooManyAhead
        case shutDown
        case failed(any Error)
    }

    /// The scopes a shutdown stops: the reader's current read (at the shutdown's beginning) and the executor's
    /// running request (at the end of its grace). Each is its own scope, so that stopping it cancels that one wait or
    /// request at the operation level and leaves the connection open.
    private final class ShutdownStops: Sendable {
        enum Stopped: Error { case reading }

        private struct State: Sendable {
            var readingStopped = false
            var runningStopped = false
            var read: ResourceScope?
            var request: ResourceScope?
        }

        private let state = Locked(State())

        func stopReading() {
            state.withLock { state -> ResourceScope? in
                state.readingStopped = true
                return state.read
            }?.cancel()
        }

        func stopRunning() {
            state.withLock { state -> ResourceScope? in
                state.runningStopped = true
                return state.request
            }?.cancel()
        }

        /// Runs one read in a scope the shutdown's beginning cancels; throws ``Stopped/reading`` once it began.
        func reading<Value: Sendable>(_ read: () async throws -> Value) async throws -> Value {
            do {
                return try await withResourceScope("read") { scope in
                    guard
                        state.withLock({ state -> Bool in
                            state.read = scope
                            return !state.readingStopped
                        })
                    else { throw Stopped.reading }
                    defer { state.withLock { $0.read = nil } }
                    return try await read()
                }
            } catch {
                if state.withLock({ $0.readingStopped }) { throw Stopped.reading }
                throw error
            }
        }

        /// Runs one request in its scope, which the grace's end cancels; `nil` (nothing run) once the grace ended.
        func running(_ handle: (ResourceScope) async throws -> Bool) async throws -> Bool? {
            try await withResourceScope("request") { scope in
                guard
                    state.withLock({ state -> Bool in
                        state.request = scope
                        return !state.runningStopped
                    })
                else { return nil }
                defer { state.withLock { $0.request = nil } }
                return try await handle(scope)
            }
        }
    }
}
