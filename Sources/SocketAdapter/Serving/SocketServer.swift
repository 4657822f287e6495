public import ResourceKit
public import ResourceKitIO

#if canImport(Glibc)
import Glibc
#endif

/// Serves the connections a ``SocketListener`` accepts, each in a resource scope of its own that begins once the
/// connection is accepted (Docs/Architecture.md, "Serving").
///
/// ```swift
/// try await withResourceScope("server") { scope in
///     let listener = try await SocketListener.bind(port: 7070, in: scope)
///     try await SocketServer.serve(listener) { connection, connectionScope in
///         while let line = try await connection.readLine() { try await connection.write(line + "\n") }
///     }
/// }
/// ```
///
/// What it does for a server:
/// - **A scope per connection.** The connection is registered in a scope `"connection"` that is a child of the
///   scope `serve` runs in, in a task of its own; the handler runs in it. A deadline or a cancel of that scope ends
///   that connection only; the accept never waits in a connection's scope.
/// - **Backpressure.** At ``Configuration/maxConnections`` running connections the server stops accepting (the
///   kernel's backlog holds the next clients) until one ends; nobody is refused.
/// - **Out of descriptors** (`EMFILE`, `ENFILE`) or of kernel memory (`ENOBUFS`, `ENOMEM`), it backs off (5 ms
///   doubling to 1 s, as Go's `http.Server`), tries again at once when one of its connections ends, and reports one
///   ``Event/acceptPaused(_:)`` and one ``Event/acceptResumed(failures:pausedFor:)`` per episode, never a failure
///   each. It keeps ``Configuration/descriptorReserve`` descriptors out of its own reach, so that the rest of the
///   process still finds some.
/// - **Peers that vanish** (no FIN, no reset) are noticed within ``Configuration/peerSilenceBound``: TCP keepalive
///   and `TCP_USER_TIMEOUT` on every accepted TCP connection (``SocketConnection/setPeerSilenceBound(_:)``).
public enum SocketServer {
    /// How a server accepts.
    public struct Configuration: Sendable {
        /// At most this many connections run at once; at the limit the server stops accepting until one ends.
        /// `nil` (the default): no limit but the descriptors.
        public var maxConnections: Int?
        /// Descriptors the accept loop holds on `/dev/null` and hands back to the process when it runs out, so that
        /// accepting never takes the last ones (16 by default; 0 turns it off).
        public var descriptorReserve: Int
        /// A TCP peer that vanished is noticed, and its connection's blocked read or write fails with
        /// ``SocketError/Code-swift.struct/timedOut``, within about this long (30 s by default; `nil`: the system's
        /// defaults, about 15 minutes with data in flight and never when idle).
        public var peerSilenceBound: Duration?
        /// Each connection runs on the group's next reactor (its task prefers it as executor, its socket waits on
        /// it); `nil`: the cooperative pool and the listener's reactor.
        public var reactors: IOReactorGroup?
        /// Told what happens to the accept loop (``Event``). Called on the loop's task: keep it short and
        /// non-blocking.
        public var onEvent: (@Sendable (Event) -> Void)?
        /// When it begins the server stops accepting (the listener is shut down: new connections are refused),
        /// and `serve` returns once every connection ended. Each connection's task sees it as
        /// `GracefulShutdown.current` (``RequestSession`` follows it). `nil`: only cancellation stops the server.
        public var shutdown: GracefulShutdown?

        public init(
            maxConnections: Int? = nil, descriptorReserve: Int = 16, peerSilenceBound: Duration? = .seconds(30),
            reactors: IOReactorGroup? = nil, onEvent: (@Sendable (Event) -> Void)? = nil,
            shutdown: GracefulShutdown? = nil
        ) {
            self.maxConnections = maxConnections.map { max(1, $0) }
            self.descriptorReserve = max(0, descriptorReserve)
            self.peerSilenceBound = peerSilenceBound
            self.reactors = reactors
            self.onEvent = onEvent
            self.shutdown = shutdown
        }
    }

    /// What the accept loop reports.
    public enum Event: Sendable, Equatable, CustomStringConvertible {
        /// Accepting paused: the process or the system is out of descriptors or memory (`error`); the server tries
        /// again with a growing delay, and at once when one of its connections ends.
        case acceptPaused(SocketError)
        /// Accepting again, after `failures` failed attempts over `pausedFor`.
        case acceptResumed(failures: Int, pausedFor: Duration)

        public var description: String {
            switch self {
            case .acceptPaused(let error):
                return "accept paused (\(error)); retrying with backoff"
            case .acceptResumed(let failures, let duration):
                return "accept resumed after \(failures) failed attempts in \(duration)"
            }
        }
    }

    /// Accepts connections on `listener` until the calling task or scope is cancelled, or the configuration's
    /// ``Configuration/shutdown`` begins, running `handler` for each in a scope of its own (see ``SocketServer``).
    /// After a shutdown began it returns once every connection ended.
    ///
    /// An error `handler` throws ends its connection and nothing else: its scope closes the connection.
    ///
    /// Cancellation: cancelling the calling task (or the scope `serve` runs in, or its deadline) stops the accept at
    /// once and cancels every connection's scope (their blocked reads and writes throw, their resources are
    /// cancelled and closed); `serve` returns after every connection ended, throwing `CancellationError` (or
    /// `DeadlineExceededError`).
    /// - Throws: also ``SocketError`` when the listener fails for good (it was closed or shut down).
    public static func serve(
        _ listener: SocketListener,
        configuration: Configuration = Configuration(),
        handler: @escaping @Sendable (SocketConnection, ResourceScope) async throws -> Void
    ) async throws {
        let slots = ConnectionSlots(limit: configuration.maxConnections)
        let reserve = DescriptorReserve(size: configuration.descriptorReserve)
        var backoff = AcceptBackoff()
        let tcp = listener.localAddress.family != .unix
        let shutdown = configuration.shutdown
        // Inside the shutdown's `begin()`: once it returns, new connections are refused (the listening socket is shut
        // down, which wakes the accept too) and no slot is handed out.
        let stop = shutdown?.whenBegun {
            slots.stop()
            listener.cancel()
        }
        defer { if let stop { shutdown?.removeWhenBegun(stop) } }
        try await withThrowingDiscardingTaskGroup { group in
            while try await slots.take() {
                let outcome: SocketListener.AcceptOutcome
                do {
                    outcome =
                        reserve.refill()
                        ? try await listener.acceptDescriptor()
                        : .exhausted(SocketError(.descriptorsExhausted, call: "open", errno: EMFILE))
                } catch is SocketError where shutdown?.hasBegun == true {
                    // The listener was shut down for the shutdown.
                    slots.untake()
                    break
                } catch {
                    slots.untake()
                    throw error
                }
                switch outcome {
                case .accepted(let fd):
                    if let event = backoff.accepted(at: .now) { configuration.onEvent?(event) }
                    let reactor = configuration.reactors?.next()
                    group.addTask(executorPreference: reactor) {
                        defer { slots.give() }
                        // Whatever ends this connection (its handler's error, its scope's cancel or deadline, the
                        // server's cancel) ends it alone, so it is not rethrown: the server's own cancellation
                        // surfaces from the accept loop's wait, and the group waits for this task either way.
                        try? await GracefulShutdown.$current.withValue(shutdown) {
                            try await withResourceScope("connection") { scope in
                                let connection = SocketConnection(
                                    fd: fd, reactor: reactor ?? listener.descriptor.reactor)
                                _ = try await connection.register(in: scope, label: "accepted")
                                if tcp {
                                    connection.setNoDelay(true)
                                    if let bound = configuration.peerSilenceBound {
                                        connection.setPeerSilenceBound(bound)
                                    }
                                }
                                try await handler(connection, scope)
                            }
                        }
                    }
                case .exhausted(let error):
                    slots.untake()
                    reserve.release()
                    let failure = backoff.failed(error, at: .now)
                    if let event = failure.event { configuration.onEvent?(event) }
                    try await slots.pause(for: failure.delay)
                }
            }
        }
    }
}
