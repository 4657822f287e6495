import CSystemShims
import ResourceKit

#if canImport(Glibc)
import Glibc
#endif

/// A shutdown that running work can observe, in two steps: it *begins* (stop taking new work, finish what runs), and
/// its *grace* expires `grace` later, or at once with ``endNow()`` (what still runs is cancelled). In the spirit of
/// swift-service-lifecycle's graceful shutdown and Go's `Server.Shutdown` (Docs/Architecture.md, "Serving").
///
/// `SocketServer.serve` stops accepting when it begins (new connections are refused) and `RequestSession` closes
/// idle connections at once, lets running requests finish within the grace, then cancels their request scopes.
/// Other work reads ``current`` (bound by the server for each connection's task) or holds the object.
///
/// Nothing here installs a signal handler by itself: ``handleSignals(_:)`` is opt-in.
public final class GracefulShutdown: Sendable {
    /// The shutdown the current task's server serves under, if any.
    @TaskLocal public static var current: GracefulShutdown?

    /// How long running work may take once the shutdown began.
    public let grace: Duration
    private let begun = OneShotEvent()
    private let graceOver = OneShotEvent()
    private let beganAt = Locked<ContinuousClock.Instant?>(nil)
    /// What runs inside the first ``begin()``, by registration (``whenBegun(_:)``).
    private let hooks = Locked<(next: Int, byID: [Int: @Sendable () -> Void])>((0, [:]))

    /// A shutdown that has not begun; `grace` is at least zero.
    public init(grace: Duration = .seconds(10)) {
        self.grace = max(.zero, grace)
    }

    /// Whether the shutdown began.
    public var hasBegun: Bool {
        // Read where `begin()` writes first, before its hooks run: what a hook wakes sees the shutdown begun.
        beganAt.withLock { $0 != nil }
    }

    /// Whether the grace is over: ``grace`` passed since the shutdown began, or ``endNow()`` was called.
    public var graceHasExpired: Bool {
        if graceOver.isSet { return true }
        guard let began = beganAt.withLock({ $0 }) else { return false }
        return ContinuousClock.now >= began + grace
    }

    /// Begins the shutdown; idempotent (the first call starts the grace). Non-blocking, any thread. What must stop
    /// with it synchronously (a server's accept) has done so when the first call returns.
    public func begin() {
        let first = beganAt.withLock { began -> Bool in
            guard began == nil else { return false }
            began = .now
            return true
        }
        guard first else { return }
        let run = hooks.withLock { hooks in
            defer { hooks.byID = [:] }
            return hooks.byID.sorted { $0.key < $1.key }.map(\.value)
        }
        for hook in run { hook() }
        begun.set()
    }

    /// Runs `hook` inside the first ``begin()``, or at once if the shutdown began already (then returns `nil`).
    /// Short and non-blocking. Remove it with ``removeWhenBegun(_:)`` when what it stops ends first.
    package func whenBegun(_ hook: @escaping @Sendable () -> Void) -> Int? {
        let id = hooks.withLock { hooks -> Int? in
            guard beganAt.withLock({ $0 }) == nil else { return nil }
            hooks.next += 1
            hooks.byID[hooks.next] = hook
            return hooks.next
        }
        if id == nil { hook() }
        return id
    }

    /// Forgets a hook of ``whenBegun(_:)``.
    package func removeWhenBegun(_ id: Int) {
        _ = hooks.withLock { $0.byID.removeValue(forKey: id) }
    }

    /// Begins the shutdown if it has not, and ends its grace at once. Non-blocking, any thread.
    public func endNow() {
        begin()
        graceOver.set()
    }

    /// Waits until the shutdown begins.
    ///
    /// Cancellation: throws `CancellationError` (or the scope's reason) at once.
    public func waitUntilBegun() async throws {
        try await begun.wait()
    }

    /// Waits until the grace is over (``graceHasExpired``).
    ///
    /// Cancellation: throws `CancellationError` (or the scope's reason) at once.
    public func waitUntilGraceExpires() async throws {
        try await begun.wait()
        guard let began = beganAt.withLock({ $0 }) else { return }
        do {
            try await graceOver.wait(deadline: began + grace)
        } catch is DeadlineExceededError {
            // The grace is over, unless the deadline was the scope's (then the scope is cancelled).
            try ResourceScope.current?.checkCancellation()
        }
    }

    /// Opt-in: the first of `signals` received begins the shutdown, the next one ends its grace at once. From this
    /// call on the signals no longer have their default action (the process does not die of them): a handler that
    /// only writes to an eventfd receives them, in any thread, and a task of the returned handler acts on them, for
    /// as long as it lives. Keep it; once it is freed the signals are received and dropped. The default is `SIGTERM`
    /// (15) and `SIGINT` (2).
    /// - Throws: `SystemError` when the eventfd cannot be made or a signal number is invalid.
    public func handleSignals(_ signals: [Int32] = [15, 2]) throws -> SignalHandler {
        try SignalHandler(signals: signals, shutdown: self)
    }

    /// Turns signals into the steps of a ``GracefulShutdown`` while it lives (``handleSignals(_:)``). One at a time
    /// per process: the signal handler writes to one eventfd, made at the first use and kept open for the process's
    /// life, so that a signal arriving as a handler is freed never writes to a descriptor number closed meanwhile.
    public final class SignalHandler: Sendable {
        private static let events: GuardedDescriptor? = (try? Syscall.makeEventFD()).map { GuardedDescriptor($0) }

        private let signals: [Int32]
        private let task: Task<Void, Never>

        init(signals: [Int32], shutdown: GracefulShutdown) throws {
            guard let events = Self.events else { throw SystemError("eventfd", errno: EMFILE) }
            for number in signals {
                if try events.withDescriptor({ fd in rk_signal_to_eventfd(number, fd) }) != 0 {
                    let error = SystemError("sigaction", errno: Syscall.errno)
                    for undo in signals { _ = rk_signal_to_eventfd(undo, -1) }
                    throw error
                }
            }
            self.signals = signals
            // Owner: this handler, which cancels it when freed. Outside any scope: the signals belong to the process.
            task = Task {
                await withoutResourceScope {
                    while true {
                        let received = try? await events.perform(.readable, boundTo: nil) { fd -> UInt64? in
                            var count: UInt64 = 0
                            let read = try Syscall.nonBlocking("read") { Glibc.read(fd, &count, 8) }
                            return read.map { _ in count }
                        }
                        guard let received else { return }
                        for _ in 0..<received {
                            if shutdown.hasBegun { shutdown.endNow() } else { shutdown.begin() }
                        }
                    }
                }
            }
        }

        deinit {
            for number in signals { _ = rk_signal_to_eventfd(number, -1) }
            task.cancel()
        }
    }
}
