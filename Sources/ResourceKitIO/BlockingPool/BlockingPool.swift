import Foundation
public import ResourceKit

/// Dedicated threads for calls that must block (a Postgres cancel request, `pread`, `getaddrinfo`), so that
/// they never occupy the cooperative thread pool.
///
/// The pool has a fixed number of threads, started on first use, and a bounded queue.
///
/// Cancellation: a job that is cancelled (its task, its handle, its scope or its deadline) *before a thread
/// picked it up* is dropped: it never runs. A job that is already running cannot be interrupted by the pool:
/// the caller is resumed at once with `CancellationError` and the job's eventual result is discarded; pass
/// `onCancel` to make the blocking call itself return early (close a socket, send a signal).
public final class BlockingPool: Sendable {
    /// The process-wide pool: 4 threads, 65,536 queued jobs at most.
    public static let shared = BlockingPool(threadCount: 4, queueLimit: 65_536, name: "rk.blocking")

    private final class Job: Sendable {
        let execute: @Sendable () -> Void
        let isAbandoned: @Sendable () -> Bool
        init(execute: @escaping @Sendable () -> Void, isAbandoned: @escaping @Sendable () -> Bool) {
            self.execute = execute
            self.isAbandoned = isAbandoned
        }
    }

    private struct Queue {
        var jobs: [Job] = []
        var head = 0
        var started = false
        var shutDown = false
        var running = 0
        var pending: Int { jobs.count - head }
    }

    /// Number of threads.
    public let threadCount: Int
    /// Maximum number of queued (not yet running) jobs.
    public let queueLimit: Int
    private let name: String
    private let queue = Locked(Queue(), withCondition: true)
    private let queuedCounts = Broadcast<Int>()

    /// Creates a pool; its threads start on the first job.
    public init(threadCount: Int, queueLimit: Int = 65_536, name: String = "rk.blocking") {
        precondition(threadCount > 0, "BlockingPool needs at least one thread")
        self.threadCount = threadCount
        self.queueLimit = queueLimit
        self.name = name
    }

    /// Runs `work` on a pool thread and returns its result.
    ///
    /// - Parameters:
    ///   - handle: binds the job to a resource: cancelling it (or its scope) cancels the job.
    ///   - deadline: an extra deadline for this job.
    ///   - onCancel: runs once if the job is cancelled after it was queued; short and non-blocking.
    ///   - work: the blocking call. It runs on a pool thread, never on the cooperative pool.
    /// - Throws: `CancellationError`, `DeadlineExceededError`, `ResourceKitError.Code.blockingPoolFull`,
    ///   `ResourceKitError.Code.blockingPoolShutDown`, or what `work` threw.
    public func run<T: Sendable>(
        boundTo handle: ResourceHandle? = nil,
        deadline: ContinuousClock.Instant? = nil,
        onCancel: (@Sendable (CancellationReason) -> Void)? = nil,
        _ work: @escaping @Sendable () throws -> T
    ) async throws -> T {
        let cell = CancellationCell<T>()
        return try await cell.run(boundTo: handle, deadline: deadline, onCancel: onCancel) { cell in
            let job = Job(
                execute: {
                    cell.complete(Result { try work() })
                },
                isAbandoned: { cell.isResolved }
            )
            if let error = enqueue(job) {
                cell.fail(error)
            }
        }
    }

    /// Queues `work` without waiting for it: the form to use inside `onCancel` or `cancel()`, which must not
    /// block or suspend (for example, to send a Postgres cancel request).
    /// - Returns: `false` if the pool is shut down or full (the work will not run).
    @discardableResult
    public func submit(_ work: @escaping @Sendable () -> Void) -> Bool {
        enqueue(Job(execute: work, isAbandoned: { false })) == nil
    }

    /// Number of jobs waiting for a thread.
    public var queuedCount: Int { queue.withLock { $0.pending } }

    /// The number of queued jobs: the current one, then every change. For tests that wait for "a job is
    /// queued behind a busy thread" as an event rather than by polling ``queuedCount``.
    @_spi(Testing) public func queuedCountUpdates() -> AsyncStream<Int> {
        queuedCounts.subscribe(bufferingNewest: 64) { queuedCount }
    }

    /// Number of jobs running now.
    public var runningCount: Int { queue.withLock { $0.running } }

    /// Stops accepting jobs; queued jobs are still run, then the threads exit.
    public func shutdown() {
        queue.withLockSignalling(all: true) { $0.shutDown = true }
    }

    private func enqueue(_ job: Job) -> ResourceKitError? {
        let (error, startThreads) = queue.withLockSignalling { queue -> (ResourceKitError?, Bool) in
            if queue.shutDown {
                return (ResourceKitError(.blockingPoolShutDown, "the blocking pool was shut down"), false)
            }
            if queue.pending >= queueLimit {
                return (ResourceKitError(.blockingPoolFull, "the blocking pool's queue is full"), false)
            }
            queue.jobs.append(job)
            let start = !queue.started
            queue.started = true
            return (nil, start)
        }
        if error == nil, queuedCounts.hasSubscribers { queuedCounts.yield(queuedCount) }
        if startThreads {
            for index in 0..<threadCount {
                DedicatedThread.start(name: "\(name).\(index)") { [self] in self.workerLoop() }
            }
        }
        return error
    }

    private func workerLoop() {
        while true {
            // Take the next job under the lock; ask whether it was abandoned (its own lock) after releasing it.
            let next = queue.waitWithLock { queue -> Job?? in
                if queue.pending > 0 {
                    let job = queue.jobs[queue.head]
                    queue.head += 1
                    if queue.head > 1024 && queue.head * 2 > queue.jobs.count {
                        queue.jobs.removeFirst(queue.head)
                        queue.head = 0
                    }
                    queue.running += 1
                    return .some(job)
                }
                return queue.shutDown ? .some(nil) : nil
            }
            guard let job = next else { return }
            if queuedCounts.hasSubscribers { queuedCounts.yield(queuedCount) }
            if !job.isAbandoned() {
                job.execute()
            }
            queue.withLock { $0.running -= 1 }
        }
    }
}
