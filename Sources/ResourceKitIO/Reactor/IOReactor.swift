import CSystemShims
import Foundation
import Synchronization

public import ResourceKit
#if canImport(Glibc)
import Glibc
#endif

/// An epoll thread with an eventfd wake-up: the cancellable "wait until this descriptor is readable or
/// writable". Deadlines are the core's (`DeadlineTimers`), not the reactor's.
///
/// ```swift
/// while true {
///     let n = read(fd, buffer, count)
///     if n >= 0 { return n }
///     guard errno == EAGAIN else { throw SystemError.current("read") }
///     try await IOReactor.shared.wait(for: fd, .readable, boundTo: handle)
/// }
/// ```
///
/// Cancellation: a wait throws `CancellationError` the moment its task is cancelled (from inside
/// `withTaskCancellationHandler`), or its handle or scope is cancelled; `DeadlineExceededError` when its
/// deadline passes. A waiter whose descriptor is closed under it gets `ResourceKitError.Code.descriptorClosed`
/// (call ``descriptorWillClose(_:)`` before closing a descriptor that may have waiters), never a hang.
///
/// ## As a task executor
///
/// The reactor is also a `TaskExecutor`: a task that prefers it runs on the reactor's own thread, between two
/// `epoll_wait` calls, and a wait of that task that becomes ready resumes right there, without waking a
/// cooperative thread. Under a load of many queries or sockets that costs less CPU per operation (the figures,
/// with the command that measures them, are in the measurement log (Benchmarks/History.md)):
///
/// ```swift
/// try await withTaskExecutorPreference(IOReactor.shared) {
///     try await serveClients(pool)  // every task it starts prefers the reactor too
/// }
/// ```
///
/// Everything such a task does runs on one thread, the one that also delivers every readiness event of the
/// process: code that blocks it (a blocking system call, a lock held across a wait, a long computation) holds
/// back every other wait. Prefer it for I/O-bound server work under load; keep blocking and CPU-heavy work on
/// the cooperative pool or the `BlockingPool`, and keep a single sequential client on the cooperative pool
/// (there it is slower: a query on the reactor's thread never looks for its answer before parking). Jobs
/// enqueued on a reactor that is shut down or unavailable run on the global concurrent executor instead, so a
/// task that prefers it never hangs. Cancellation is unchanged: the cancelling thread resumes the waiter, and
/// the task continues on the reactor's thread.
///
/// One reactor's thread is one core. To use every core, keep a reactor per core in an ``IOReactorGroup`` and put
/// each unit of work on one of them together with the descriptors it waits on (a `PostgresShardedPool` does that
/// for a pool's connections): a task whose descriptors another reactor watches would hop between the two threads
/// on every wait.
public final class IOReactor: TaskExecutor, Sendable {
    /// The process-wide reactor, started on first use.
    public static let shared = IOReactor(name: "rk.reactor")

    /// The readiness table and the reactor's life (``ReactorLifecycle``: the loop's state and the jobs queued for
    /// it), under one lock.
    private struct State {
        var table = ReadinessTable<CancellationCell<IOEvents>>()
        var lifecycle: ReactorLifecycle<UnownedJob>
    }

    private let epollFD: Int32
    private let wakeFD: Int32
    private let setupError: ResourceKitError?
    private let state: Locked<State>
    private let nextWaiter = Atomic<UInt64>(0)
    /// The loop's thread (`pthread_self()`) while it runs, else 0.
    private let loopThread = Atomic<UInt>(0)
    /// Every change of the number of descriptors with a waiter, for ``waitingDescriptorCounts()``.
    private let counts = Broadcast<Int>()

    /// Starts a reactor with its own thread. If epoll or eventfd cannot be created (descriptor exhaustion),
    /// the reactor is unavailable and every wait throws `ResourceKitError.Code.reactorUnavailable`.
    public init(name: String = "rk.reactor") {
        let epfd = rk_epoll_create()
        let efd = rk_eventfd_create()
        if epfd < 0 || efd < 0 {
            let error = SystemError.current(epfd < 0 ? "epoll_create1" : "eventfd")
            if epfd >= 0 { Syscall.close(epfd) }
            if efd >= 0 { Syscall.close(efd) }
            epollFD = -1
            wakeFD = -1
            setupError = ResourceKitError(
                .reactorUnavailable, "the I/O reactor could not be started", underlying: error)
            state = Locked(State(lifecycle: ReactorLifecycle(available: false)))
            return
        }
        epollFD = epfd
        wakeFD = efd
        setupError = nil
        state = Locked(State(lifecycle: ReactorLifecycle(available: true)))
        _ = rk_epoll_ctl(epfd, ReadinessTable<Void>.CtlOperation.add.rawValue, efd, rk_EPOLLIN, 0)
        DedicatedThread.start(name: name) { [self] in self.loop() }
    }

    /// Runs `job` on the reactor's thread before its next wait for events (the `TaskExecutor` requirement; see
    /// "As a task executor" above). Wakes the thread if it is blocked in `epoll_wait`; a job enqueued from the
    /// reactor's own thread (a waiter it resumed) costs no system call. On a reactor that is shut down or
    /// unavailable the job runs on the global concurrent executor.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let accepted = state.withLock { state -> Bool in
            switch state.lifecycle.enqueue(job) {
            case .queued:
                return true
            case .queuedWakeLoop:
                // Under the lock: the loop closes the eventfd only after it saw the reactor stop under it.
                _ = rk_eventfd_signal(wakeFD)
                return true
            case .runElsewhere:
                return false
            }
        }
        if !accepted { globalConcurrentExecutor.enqueue(job) }
    }

    /// Whether the caller runs on this reactor's thread (a task that prefers the reactor as its executor): such
    /// a caller must never block or spin, since the thread also delivers every readiness event.
    package var isCurrentThread: Bool {
        let loop = loopThread.load(ordering: .relaxed)
        return loop != 0 && loop == UInt(pthread_self())
    }

    /// Waits until `fd` is ready for `interest`.
    ///
    /// - Parameters:
    ///   - fd: a non-blocking descriptor that can be polled (socket, pipe, FIFO, eventfd, character device).
    ///   - interest: readable or writable.
    ///   - handle: binds the wait to a resource: cancelling the resource or its scope (or the scope's
    ///     deadline passing) ends the wait at once.
    ///   - deadline: an extra deadline for this wait alone.
    /// - Returns: the events the kernel reported (possibly spurious: retry the call and wait again).
    /// - Throws: `CancellationError`, `DeadlineExceededError`, or `ResourceKitError` (`descriptorClosed`,
    ///   `badDescriptor`, `notPollable`, `alreadyWaiting`, `reactorUnavailable`).
    @discardableResult
    public func wait(
        for fd: Int32,
        _ interest: IOInterest,
        boundTo handle: ResourceHandle? = nil,
        deadline: ContinuousClock.Instant? = nil
    ) async throws -> IOEvents {
        try await wait(for: fd, interest, boundTo: handle, deadline: deadline, afterCancel: nil)
    }

    /// ``wait(for:_:boundTo:deadline:)``, and when a cancel wins while the wait is parked, `afterCancel` runs on
    /// the canceller's thread right after the waiter resumed (as `CancellationCell`'s `afterCancel`: short,
    /// non-blocking). An adapter that stops its external work per wait (a Postgres cancel request, a kill command
    /// queued for a second connection) passes it here instead of wrapping its waits in an operation of their own.
    ///
    /// Cancellation: as ``wait(for:_:boundTo:deadline:)``; `afterCancel` runs at most once, with the reason, when a
    /// cancel (the task, the handle or its scope, a deadline) ends this wait, and never for a wait that completed.
    /// It must not block and must not take a lock held while a continuation is resumed.
    @discardableResult
    public func wait(
        for fd: Int32,
        _ interest: IOInterest,
        boundTo handle: ResourceHandle?,
        deadline: ContinuousClock.Instant?,
        afterCancel: (@Sendable (CancellationReason) -> Void)?
    ) async throws -> IOEvents {
        try await wait(for: fd, boundTo: handle, deadline: deadline, afterCancel: afterCancel) { cell, id in
            self.register(fd: fd, interest: interest, id: id, cell: cell)
        }
    }

    /// ``wait(for:_:boundTo:deadline:)`` for a descriptor that `owner` may close (or stop holding) at any moment,
    /// from any thread: the wait registers only while `owner` still holds `fd`, under `owner`'s lock, so that a
    /// close in between cannot leave it registered on a stranger's descriptor that reused the number
    /// (Docs/Architecture.md, "Descriptors that close under a wait"). A descriptor no longer held fails the wait
    /// with `ResourceKitError.Code.descriptorClosed` and registers nothing; one released while the wait is parked
    /// fails it the same way (the holder calls ``descriptorWillClose(_:)``).
    ///
    /// Cancellation: as ``wait(for:_:boundTo:deadline:)``.
    @discardableResult
    public func wait(
        for fd: Int32,
        _ interest: IOInterest,
        heldBy owner: some DescriptorHolder,
        boundTo handle: ResourceHandle?,
        deadline: ContinuousClock.Instant?
    ) async throws -> IOEvents {
        try await wait(for: fd, boundTo: handle, deadline: deadline, afterCancel: nil) { cell, id in
            let held = owner.whileHeld(fd) {
                self.register(fd: fd, interest: interest, id: id, cell: cell)
            }
            if !held {
                cell.fail(ResourceKitError(.descriptorClosed, "the descriptor was closed before the wait registered"))
            }
        }
    }

    /// One wait: a cell whose start registers it (`register`, handed the cell and the waiter's id), whose cancel
    /// removes it by that id (a number reused since cannot match it).
    private func wait(
        for fd: Int32,
        boundTo handle: ResourceHandle?,
        deadline: ContinuousClock.Instant?,
        afterCancel: (@Sendable (CancellationReason) -> Void)?,
        register: (CancellationCell<IOEvents>, UInt64) -> Void
    ) async throws -> IOEvents {
        if let setupError { throw setupError }
        let cell = CancellationCell<IOEvents>()
        // The id exists before the wait is registered, so that a cancel arriving first can name it.
        let id = nextWaiter.add(1, ordering: .relaxed).newValue
        return try await cell.run(
            boundTo: handle, deadline: deadline,
            onCancel: { _ in
                self.removeWaiter(fd: fd, id: id)
            },
            afterCancel: afterCancel
        ) { cell in
            register(cell, id)
        }
    }

    private typealias Table = ReadinessTable<CancellationCell<IOEvents>>

    private func register(fd: Int32, interest: IOInterest, id: UInt64, cell: CancellationCell<IOEvents>) {
        let (request, failures) = withTable { state -> (Table.Request?, [Table.Failure]) in
            guard state.lifecycle.acceptsWaits else {
                return (nil, [(cell, ResourceKitError(.reactorUnavailable, "the I/O reactor was shut down"))])
            }
            return state.table.add(fd: fd, interest: interest, id: id, waiter: cell)
        }
        Self.fail(failures)
        perform(request)
    }

    /// Makes the table's kernel calls, outside the lock, until the descriptor needs no more (at most one
    /// call per descriptor is in flight: the table hands the next one to whoever finishes the current one).
    private func perform(_ first: Table.Request?) {
        var next = first
        while let request = next {
            let result =
                rk_epoll_ctl(epollFD, request.op.rawValue, request.fd, request.events, request.registration) == 0
                ? 0 : Syscall.errno
            let (follow, failures) = withTable { $0.table.finish(request, result: result) }
            Self.fail(failures)
            next = follow
        }
    }

    private static func fail(_ failures: [Table.Failure]) {
        for (waiter, error) in failures { waiter.fail(error) }
    }

    /// Tells the reactor that `fd` is about to be closed: its waiters throw
    /// `ResourceKitError.Code.descriptorClosed` and its registration is removed. Call it before `close(fd)`.
    public func descriptorWillClose(_ fd: Int32) {
        let (waiters, delete) = withTable { $0.table.descriptorWillClose(fd: fd) }
        if let delete {
            _ = rk_epoll_ctl(epollFD, delete.op.rawValue, fd, 0, delete.registration)
        }
        for waiter in waiters {
            waiter.fail(ResourceKitError(.descriptorClosed, "the descriptor was closed while a task waited on it"))
        }
    }

    /// Number of descriptors with a waiter (for tests and snapshots).
    public var waitingDescriptorCount: Int { state.withLock { $0.table.count } }

    /// The number of descriptors with a waiter: the current one, then every change. For tests and tools
    /// that wait for "the read is parked" as an event rather than by polling ``waitingDescriptorCount``. The
    /// stream ends when its consumer stops iterating; a slow consumer sees the newest counts.
    @_spi(Testing) public func waitingDescriptorCounts() -> AsyncStream<Int> {
        counts.subscribe(bufferingNewest: 64) { waitingDescriptorCount }
    }

    /// Runs `body` under the lock; publishes the waiting-descriptor count after it if `body` changed it.
    private func withTable<Result>(_ body: (inout State) -> Result) -> Result {
        let (result, changed) = state.withLock { state -> (Result, Int?) in
            let before = state.table.count
            let result = body(&state)
            return (result, state.table.count == before ? nil : state.table.count)
        }
        if let changed { counts.yield(changed) }
        return result
    }

    /// Stops the reactor thread; every waiter throws `ResourceKitError.Code.reactorUnavailable`.
    /// The shared reactor is never shut down.
    public func shutdown() {
        let waiters = withTable { state -> [CancellationCell<IOEvents>] in
            guard state.lifecycle.shutdown() else { return [] }
            // Under the lock, so that the loop cannot have closed the eventfd yet.
            _ = rk_eventfd_signal(wakeFD)
            return state.table.removeAll()
        }
        for waiter in waiters {
            waiter.fail(ResourceKitError(.reactorUnavailable, "the I/O reactor was shut down"))
        }
    }

    /// The cancel path: forgets the waiter, under the lock, with no system call (its one-shot registration
    /// stays armed and harmless; see ``ReadinessTable``).
    private func removeWaiter(fd: Int32, id: UInt64) {
        withTable { $0.table.remove(fd: fd, id: id) }
    }

    private func loop() {
        let capacity = 256
        var events = [UInt32](repeating: 0, count: capacity)
        var registrations = [UInt64](repeating: 0, count: capacity)
        let epfd = epollFD
        var batch: [UnownedJob] = []
        let executor = asUnownedTaskExecutor()
        // Reused from one batch of events to the next: an event allocates nothing on this thread.
        var ready: [(CancellationCell<IOEvents>, IOEvents)] = []
        var rearm: [Table.Request] = []
        ready.reserveCapacity(capacity)
        loopThread.store(UInt(pthread_self()), ordering: .relaxed)
        while true {
            // Take the queued jobs, or note that the wait below must be woken for the next one.
            let turn = state.withLock { $0.lifecycle.loopTurn(taking: &batch) }
            if turn == .exit { break }
            let ranJobs = turn == .runJobs
            for job in batch { job.runSynchronously(on: executor) }
            batch.removeAll(keepingCapacity: true)
            // After jobs, only a look: they may have queued more (resumed tasks), which run next.
            let n = events.withUnsafeMutableBufferPointer { ev in
                registrations.withUnsafeMutableBufferPointer { reg in
                    rk_epoll_wait(epfd, ev.baseAddress, reg.baseAddress, Int32(capacity), ranJobs ? 0 : -1)
                }
            }
            let count = max(Int(n), 0)
            var woken = false
            withTable { state in
                // Awake: the waiters resumed below enqueue their tasks here without signalling the eventfd.
                state.lifecycle.loopAwake()
                for i in 0..<count {
                    if registrations[i] == 0 {
                        woken = true
                        continue
                    }
                    let (fired, request) = state.table.fire(registration: registrations[i], events: events[i])
                    if let reader = fired.reader { ready.append(reader) }
                    if let writer = fired.writer { ready.append(writer) }
                    if let request { rearm.append(request) }
                }
            }
            if woken { _ = rk_eventfd_drain(wakeFD) }
            for (waiter, reported) in ready {
                waiter.succeed(reported)
            }
            ready.removeAll(keepingCapacity: true)
            for request in rearm {
                perform(request)
            }
            rearm.removeAll(keepingCapacity: true)
        }
        loopThread.store(0, ordering: .relaxed)
        let leftover = state.withLock { $0.lifecycle.loopExited() }
        for job in leftover { globalConcurrentExecutor.enqueue(job) }
        Syscall.close(wakeFD)
        Syscall.close(epollFD)
    }
}
