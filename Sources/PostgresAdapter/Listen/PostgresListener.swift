import CLibPQ
import Foundation
public import ResourceKit

#if canImport(Glibc)
import Glibc
#endif

/// One `NOTIFY` received.
public struct PostgresNotification: Sendable, Hashable {
    public let channel: String
    /// The payload (may hold user data: ResourceKit never logs it).
    public let payload: String
    /// The server process that sent it.
    public let senderPID: Int32
}

/// `LISTEN` as a resource: a dedicated connection listening on some channels, read as an `AsyncSequence` of
/// notifications.
///
/// - The listener opens its own connection (never one of a pool's: no pool can hand a listening connection
///   to anyone else) and owns it: the connection closes with the listener.
/// - Waiting is a reactor wait on the connection's socket: no polling. A reader the listener owns keeps the
///   socket drained into a bounded buffer while nobody iterates, so a slow consumer never backs the server's
///   notification queue up. **Overflow policy**: past ``bufferLimit`` the *oldest* buffered notification is
///   dropped and counted in ``droppedCount``; the newest are kept.
/// - Cancellation: cancelling the consuming task, the listener's scope (or its deadline), or calling
///   ``cancel()`` ends the sequence at once (`CancellationError`, or `DeadlineExceededError`) and shuts the
///   connection's socket down, so the server ends the session and nothing listens any more; the scope then
///   closes the listener. Notifications still buffered are dropped.
/// - A lost connection ends the sequence with ``PostgresError/Code/connection`` after the buffered ones.
/// - `LISTEN` needs a session of its own: a listener whose backend cannot be verified (behind a pooler such as
///   PgBouncer, whose transaction mode runs each statement on whichever server connection is free and drops
///   the notifications) fails at ``listen(to:conninfo:in:bufferLimit:allowUnverifiedSession:registry:onNotice:)``
///   with ``PostgresError/Code/sessionRequired`` rather than listen on nothing.
public final class PostgresListener: ManagedResource, AsyncSequence, CustomStringConvertible {
    public typealias Element = PostgresNotification

    /// The resource kind of listeners.
    public static let kind = ResourceKind(name: "postgres.listener", closeTimeout: .seconds(5))

    private struct Buffer: Sendable {
        var items: [PostgresNotification] = []
        var head = 0
        var dropped = 0
        var waiter: CancellationCell<PostgresNotification?>?
        var ended: (any Error)?
        var endedCleanly = false
    }

    /// The most notifications buffered while nobody iterates.
    public let bufferLimit: Int
    /// The channels listened on.
    public let channels: [String]
    private let connection: PostgresConnection

    /// The socket of the listener's own connection, for the conformance kit's leak check.
    @_spi(Testing) public var ownedDescriptors: [Int32] { connection.ownedDescriptors }
    private let buffer = Locked(Buffer())
    private let registration = HandleSlot()
    private let reader = OwnedTasks()

    private init(connection: PostgresConnection, channels: [String], bufferLimit: Int) {
        self.connection = connection
        self.channels = channels
        self.bufferLimit = Swift.max(1, bufferLimit)
    }

    public var description: String { "PostgresListener(\(channels.count) channel(s))" }

    /// The listening backend's verified pid (`nil` behind a pooler: see ``PostgresConnection/backendPID``).
    public var backendPID: Int32? { connection.backendPID }

    /// Notifications dropped because the buffer was full (the oldest go first).
    public var droppedCount: Int { buffer.withLock { $0.dropped } }
    private let drops = Broadcast<Int>()

    /// ``droppedCount`` now, then every time it grows: to alert on lost notifications, or to await a burst
    /// being absorbed. The stream ends when its consumer stops iterating.
    public func droppedCountUpdates() -> AsyncStream<Int> {
        drops.subscribe(bufferingNewest: 16) { droppedCount }
    }

    /// Connects, runs `LISTEN` for each channel, and starts reading.
    ///
    /// - Parameters:
    ///   - channels: channel names (quoted as identifiers: any text is safe).
    ///   - conninfo: the server to listen on (a connection of its own is opened).
    ///   - scope: the scope that owns the listener (its connection closes when the scope ends).
    ///   - registry: where the listener and its connection are recorded.
    ///   - onNotice: receives the session's notices; `nil`: registry events.
    ///   - bufferLimit: notifications kept while nobody iterates (default 10,000); see the overflow policy.
    ///   - allowUnverifiedSession: listen even when the backend cannot be verified, because you know a
    ///     session-mode pooler is in front (each client connection keeps its server connection). The listener
    ///     then checks with `pg_listening_channels()` that its channels are in place before it returns.
    /// Cancellation: as `PostgresConnection.connect`.
    /// - Throws: ``PostgresError`` (``PostgresError/Code/sessionRequired`` when the backend cannot be verified
    ///   and `allowUnverifiedSession` is `false`, or the channels are not in place), `CancellationError`,
    ///   `DeadlineExceededError`.
    public static func listen(
        to channels: [String],
        conninfo: String,
        in scope: ResourceScope,
        bufferLimit: Int = 10_000,
        allowUnverifiedSession: Bool = false,
        registry: ResourceRegistry = .shared,
        onNotice: (@Sendable (PostgresNotice) -> Void)? = nil
    ) async throws -> PostgresListener {
        guard !channels.isEmpty else { throw PostgresError(.invalidQuery, "listen needs at least one channel") }
        let connection = try await PostgresConnection.connect(
            conninfo, in: nil, configuration: .init(registry: registry, onNotice: onNotice))
        let listener = PostgresListener(connection: connection, channels: channels, bufferLimit: bufferLimit)
        let handle: ResourceHandle
        do {
            handle = try await scope.register(listener, kind: kind, label: "postgres listener")
        } catch {
            await connection.handle?.close()
            throw error
        }
        listener.registration.keep(handle)
        do {
            let verified = connection.backendPID != nil
            guard verified || allowUnverifiedSession else {
                throw PostgresError(
                    .sessionRequired,
                    "LISTEN needs a session of its own, and this connection's backend could not be verified (behind a "
                        + "pooler such as PgBouncer in transaction mode the notifications would be dropped): connect "
                        + "the listener to the server, or pass allowUnverifiedSession for a session-mode pooler")
            }
            for channel in channels {
                try await connection.execute("LISTEN " + quoteIdentifier(channel))
            }
            if !verified {
                let rows = try await connection.query("SELECT pg_listening_channels()")
                let listening = Set(try rows.map { try $0.decode(String.self, at: 0) })
                guard Set(channels).isSubset(of: listening) else {
                    throw PostgresError(
                        .sessionRequired,
                        "LISTEN is not in place on this connection's session: the pooler in front does not keep a "
                            + "session's server connection (transaction mode)")
                }
            }
            // Held for the listener's life: no other operation may run on a listening connection.
            try await connection.begin()
        } catch {
            await handle.close()
            throw error
        }
        listener.reader.start { await listener.read() }
        return listener
    }

    static func quoteIdentifier(_ name: String) -> String {
        "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    // MARK: reading

    /// The owned reader: waits for readability, moves notifications into the buffer, until the listener ends.
    private func read() async {
        let handle = registration.handle
        while true {
            let (notifications, socket, failure) = connection.readNotifications()
            deliver(notifications)
            if let failure {
                end(with: failure)
                return
            }
            do {
                try await connection.reactor.wait(for: socket, .readable, boundTo: handle)
            } catch {
                end(with: handle?.cancellationReason?.error ?? error)
                return
            }
        }
    }

    /// Appends under the bound (dropping the oldest), then hands one to a waiting consumer.
    private func deliver(_ notifications: [PostgresNotification]) {
        guard !notifications.isEmpty else { return }
        var dropped: Int?
        let (waiter, first) = buffer.withLock {
            buffer -> (CancellationCell<PostgresNotification?>?, PostgresNotification?) in
            guard buffer.ended == nil, !buffer.endedCleanly else { return (nil, nil) }
            buffer.items.append(contentsOf: notifications)
            let count = buffer.items.count - buffer.head
            if count > bufferLimit {
                let excess = count - bufferLimit
                buffer.head += excess
                buffer.dropped += excess
                dropped = buffer.dropped
            }
            if buffer.head > 4096, buffer.head * 2 > buffer.items.count {
                buffer.items.removeFirst(buffer.head)
                buffer.head = 0
            }
            guard let waiter = buffer.waiter else { return (nil, nil) }
            buffer.waiter = nil
            defer { buffer.head += 1 }
            return (waiter, buffer.items[buffer.head])
        }
        if let dropped { drops.yield(dropped) }
        if let waiter, let first, !waiter.succeed(first) {
            // The consumer left at that instant: keep the notification for the next call.
            buffer.withLock { buffer in
                buffer.head -= 1
                buffer.items[buffer.head] = first
            }
        }
    }

    private func end(with error: any Error) {
        let waiter = buffer.withLock { buffer -> CancellationCell<PostgresNotification?>? in
            if buffer.ended == nil { buffer.ended = error }
            defer { buffer.waiter = nil }
            return buffer.waiter
        }
        waiter?.fail(error)
    }

    // MARK: consuming

    public struct AsyncIterator: AsyncIteratorProtocol {
        let listener: PostgresListener
        public mutating func next() async throws -> PostgresNotification? {
            try await listener.next()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(listener: self) }

    /// The next notification, waiting for one. `nil` once the listener was closed.
    ///
    /// Cancellation: a cancelled task ends the whole listener (see the type's documentation) and throws.
    public func next() async throws -> PostgresNotification? {
        let handle = registration.handle
        if Task.isCancelled {
            handle?.cancel()
            throw CancellationError()
        }
        let cell = CancellationCell<PostgresNotification?>()
        do {
            return try await cell.run(
                boundTo: handle,
                onCancel: { [weak self] _ in
                    _ = self?.buffer.withLock { buffer in
                        if buffer.waiter === cell { buffer.waiter = nil }
                    }
                }
            ) { cell in
                enum Immediate {
                    case item(PostgresNotification)
                    case ended(any Error)
                    case closed, parked
                }
                let immediate = buffer.withLock { buffer -> Immediate in
                    if buffer.head < buffer.items.count {
                        defer { buffer.head += 1 }
                        return .item(buffer.items[buffer.head])
                    }
                    if let ended = buffer.ended { return .ended(ended) }
                    if buffer.endedCleanly { return .closed }
                    buffer.waiter = cell
                    return .parked
                }
                switch immediate {
                case .item(let item): cell.succeed(item)
                case .ended(let error): cell.fail(error)
                case .closed: cell.succeed(nil)
                case .parked: break
                }
            }
        } catch {
            // The consumer is gone: the whole listener ends (the sequence is single-consumer).
            if error.isResourceCancellation || Task.isCancelled { handle?.cancel() }
            throw error
        }
    }

    // MARK: ManagedResource

    /// Ends the sequence at once and shuts the socket down (non-blocking): the server ends the session, so
    /// nothing listens any more. ``close()`` releases the connection.
    public func cancel() {
        let reason = registration.handle?.cancellationReason?.error ?? CancellationError()
        end(with: reason)
        connection.shutDownSocket()
    }

    /// Stops the reader and closes the connection.
    public func close() async throws {
        let waiter = buffer.withLock { buffer -> CancellationCell<PostgresNotification?>? in
            buffer.endedCleanly = true
            defer { buffer.waiter = nil }
            return buffer.waiter
        }
        waiter?.succeed(nil)
        connection.shutDownSocket()
        await reader.waitForAll()
        connection.end()
        await connection.handle?.close()
    }
}
