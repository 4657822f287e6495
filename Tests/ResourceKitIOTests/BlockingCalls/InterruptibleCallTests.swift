import Glibc
import ResourceKit
@_spi(Testing) import ResourceKitIO
import ResourceKitTesting
import Synchronization
import TestSupport
import Testing

/// `BlockingPool.runInterruptible` on real threads, against a blocking "library" that behaves like SQLite where
/// it matters: a call blocks (in `poll` on a real pipe) until it finishes or is interrupted, and an interrupt
/// that arrived before the call started is cleared when it starts, as `sqlite3_step` clears `sqlite3_interrupt`.
@Suite struct InterruptibleCallTests {
    @Test func aCancelAtTheStartOfTheCallIsNeverLost() async throws {
        let library = try PipeLibrary()
        let pool = BlockingPool.dedicatedThread(name: "t.interruptible.start")
        defer { pool.shutdown() }
        for round in 0..<1_000 {
            // A lost cancel would let the statement run its 3 s: the round's result then comes too late.
            let call = Task { try await library.run(on: pool, for: .seconds(3)) }
            // Random offsets land the cancel before the pickup, between the pickup and the library's start
            // (where the library clears it), and while the library blocks.
            try await Task.sleep(for: .microseconds(Int.random(in: 0...400)))
            call.cancel()
            let result = await outcome(of: call, within: TimingBound.singleShot)
            guard result?.failure is CancellationError else {
                Issue.record("round \(round): \(String(describing: result))")
                break
            }
        }
        let (running, finished) = (library.running.load(ordering: .relaxed), library.finished.load(ordering: .relaxed))
        #expect(running == 0)
        #expect(finished == 0, "a statement ran to its end: a cancel was lost")
    }

    @Test func anInterruptNeverReachesTheNextCall() async throws {
        let library = try PipeLibrary()
        let pool = BlockingPool.dedicatedThread(name: "t.interruptible.next")
        defer { pool.shutdown() }
        var nextInterrupted = 0
        for _ in 0..<200 {
            let call = Task { try await library.run(on: pool, for: .seconds(30)) }
            try await Task.sleep(for: .microseconds(Int.random(in: 0...400)))
            call.cancel()
            _ = await call.result
            // The next call on the same library handle runs 5 ms and must finish, not be interrupted.
            do { try await library.run(on: pool, for: .milliseconds(5)) } catch { nextInterrupted += 1 }
        }
        #expect(nextInterrupted == 0, "a late interrupt reached the next call \(nextInterrupted) times")
    }

    @Test func aCallCancelledWhileQueuedNeverRuns() async throws {
        let library = try PipeLibrary()
        let pool = BlockingPool.dedicatedThread(name: "t.interruptible.queued")
        defer { pool.shutdown() }
        let busy = Task { try await library.run(on: pool, for: .seconds(30)) }
        try await until("the first call blocks", library.runningUpdates()) { $0 == 1 }
        let ran = Atomic<Bool>(false)
        let queued = Task {
            try await pool.runInterruptible(interrupt: {}) { _ in ran.store(true, ordering: .relaxed) }
        }
        try await until("the second call is queued", pool.queuedCountUpdates()) { $0 == 1 }
        queued.cancel()
        #expect(await outcome(of: queued)?.failure is CancellationError)
        busy.cancel()
        _ = await busy.result
        try await pool.runInterruptible(interrupt: {}) { _ in }  // the thread took (and skipped) the queued call
        let didRun = ran.load(ordering: .relaxed)
        #expect(!didRun)
    }

    @Test func aCallThatPollsTheFlagStopsWithoutAnInterrupt() async throws {
        let pool = BlockingPool.dedicatedThread(name: "t.interruptible.flag")
        defer { pool.shutdown() }
        let started = OneShotEvent()
        let call = Task {
            try await pool.runInterruptible(interrupt: {}) { interruption in
                started.set()
                // A progress handler's loop: work in small steps, stop when asked.
                while !interruption.isRequested { usleep(100) }
                throw LibraryInterrupted()
            }
        }
        try await started.wait()
        call.cancel()
        #expect(await outcome(of: call)?.failure is CancellationError)
    }

    @Test func aDeadlineInterruptsTheCallAndIsReportedAsTheDeadline() async throws {
        let library = try PipeLibrary()
        let pool = BlockingPool.dedicatedThread(name: "t.interruptible.deadline")
        defer { pool.shutdown() }
        let deadline = ContinuousClock.now + .milliseconds(50)
        await #expect(throws: DeadlineExceededError.self) {
            try await library.run(on: pool, for: .seconds(30), deadline: deadline)
        }
        let running = library.running.load(ordering: .relaxed)
        #expect(running == 0)
    }

    @Test func aCallThatFinishesDespiteTheCancelReturnsItsResultAfterItReturned() async throws {
        let pool = BlockingPool.dedicatedThread(name: "t.interruptible.late")
        defer { pool.shutdown() }
        let started = OneShotEvent()
        let returned = Atomic<Bool>(false)
        let call = Task {
            try await pool.runInterruptible(interrupt: {}) { _ -> Int in
                started.set()
                usleep(20_000)  // ignores the interrupt, as a call past its last interruptible point does
                returned.store(true, ordering: .relaxed)
                return 42
            }
        }
        try await started.wait()
        call.cancel()
        #expect(try await outcome(of: call)?.get() == 42)
        let callReturned = returned.load(ordering: .relaxed)
        #expect(callReturned, "the wait ended before the call returned")
    }
}

struct LibraryInterrupted: Error {}

/// A blocking library on a real pipe: a call blocks in `poll` until its time is up or a byte (the interrupt)
/// arrives; a call first drains the pipe, so an interrupt that came before it started is lost (as in SQLite).
final class PipeLibrary: Sendable {
    private let readEnd: Int32
    private let writeEnd: Int32
    /// Calls inside the library now.
    let running = Atomic<Int>(0)
    /// Calls that ran to their end.
    let finished = Atomic<Int>(0)
    /// Interrupts a call cleared when it started (they came before the library began).
    let clearedAtStart = Atomic<Int>(0)
    private let runningCounts = Broadcast<Int>()

    init() throws {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw SystemError.current("pipe") }
        (readEnd, writeEnd) = (fds[0], fds[1])
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
    }

    deinit {
        close(readEnd)
        close(writeEnd)
    }

    /// Runs one "statement" of `duration` through `runInterruptible`; throws when interrupted.
    func run(on pool: BlockingPool, for duration: Duration, deadline: ContinuousClock.Instant? = nil) async throws {
        try await pool.runInterruptible(deadline: deadline, interrupt: { self.interrupt() }) { _ in
            if !self.step(for: duration) { throw LibraryInterrupted() }
        }
    }

    func runningUpdates() -> AsyncStream<Int> {
        runningCounts.subscribe(bufferingNewest: 64) { running.load(ordering: .relaxed) }
    }

    /// `sqlite3_interrupt`: thread-safe, non-blocking.
    func interrupt() {
        var byte: UInt8 = 1
        _ = write(writeEnd, &byte, 1)
    }

    /// `sqlite3_step`: `true` when it ran to its end, `false` when interrupted.
    private func step(for duration: Duration) -> Bool {
        usleep(100)  // preparing and binding the statement: the window in which a cancel lands before the start
        if drain() { clearedAtStart.add(1, ordering: .relaxed) }
        running.add(1, ordering: .relaxed)
        runningCounts.yield(running.load(ordering: .relaxed))
        defer {
            running.subtract(1, ordering: .relaxed)
            runningCounts.yield(running.load(ordering: .relaxed))
        }
        let end = ContinuousClock.now + duration
        while true {
            let left = end - .now
            if left <= .zero {
                finished.add(1, ordering: .relaxed)
                return true
            }
            var descriptor = pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, Int32(left / .milliseconds(1)) + 1)
            if ready > 0 {
                drain()
                return false
            }
        }
    }

    /// Reads every pending interrupt; `true` if there was one.
    @discardableResult
    private func drain() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 64)
        var any = false
        while read(readEnd, &buffer, buffer.count) > 0 { any = true }
        return any
    }
}
