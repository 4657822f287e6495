import Glibc
import ResourceKitTesting
import TestSupport
import Testing

@testable import ResourceKit
@_spi(Testing) @testable import ResourceKitIO

/// The reactor as a `TaskExecutor` (Docs/Architecture.md, "The reactor as a task executor"), with real pipes: a
/// task that prefers it runs on the reactor's thread before and after its waits, is cancelled as promptly as any
/// other, and never hangs on a reactor that is shut down. Each test fails by hanging past its time limit, or by
/// finding itself on the wrong thread.
@Suite(.timeLimit(.minutes(1))) struct ReactorExecutorTests {
    @Test func aTaskThatPrefersTheReactorRunsOnItsThreadAcrossAWait() async throws {
        let reactor = IOReactor(name: "test.reactor.exec")
        defer { reactor.shutdown() }
        let pipe = try PipeResource(reactor: reactor)
        defer { Task { try await pipe.close() } }
        #expect(!reactor.isCurrentThread)
        let reader = Task(executorPreference: reactor) { () async throws -> (Bool, UInt8, Bool) in
            let before = reactor.isCurrentThread
            let byte = try await pipe.readByte(boundTo: nil)
            return (before, byte, reactor.isCurrentThread)
        }
        try await until("the read parks", reactor.waitingDescriptorCounts()) { $0 > 0 }
        pipe.writeByte()
        let (before, byte, after) = try await reader.value
        #expect(before, "the task did not start on the reactor's thread")
        #expect(byte == 1)
        #expect(after, "the task did not resume on the reactor's thread")
    }

    /// Many tasks on the one thread, each waiting in turn: every one completes (no job is lost between the
    /// loop's look for jobs and its `epoll_wait`).
    @Test func manyTasksOnTheReactorTakeTurnsOnItsThread() async throws {
        let reactor = IOReactor(name: "test.reactor.many")
        defer { reactor.shutdown() }
        let pipes = try (0..<32).map { _ in try PipeResource(reactor: reactor) }
        let rounds = 50
        let onThread = try await withThrowingTaskGroup(of: Int.self) { group in
            for pipe in pipes {
                group.addTask(executorPreference: reactor) {
                    var count = 0
                    for _ in 0..<rounds {
                        pipe.writeByte()
                        _ = try await pipe.readByte(boundTo: nil)
                        if reactor.isCurrentThread { count += 1 }
                        await Task.yield()
                    }
                    return count
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(onThread == pipes.count * rounds)
        for pipe in pipes { try await pipe.close() }
    }

    @Test func cancellingATaskOnTheReactorEndsItsWaitAndItResumesThere() async throws {
        let reactor = IOReactor(name: "test.reactor.cancel")
        defer { reactor.shutdown() }
        let pipe = try PipeResource(reactor: reactor)
        defer { Task { try await pipe.close() } }
        let reader = Task(executorPreference: reactor) { () async -> (Bool, Bool) in
            do {
                _ = try await pipe.readByte(boundTo: nil)
                return (false, reactor.isCurrentThread)
            } catch {
                return (error is CancellationError, reactor.isCurrentThread)
            }
        }
        try await until("the read parks", reactor.waitingDescriptorCounts()) { $0 > 0 }
        let cancelled = ContinuousClock.now
        reader.cancel()
        let (threwCancellation, onThread) = await reader.value
        #expect(threwCancellation)
        #expect(onThread)
        #expect(ContinuousClock.now - cancelled < TimingBound.singleShot)
        #expect(reactor.waitingDescriptorCount == 0)
    }

    /// A reactor shut down under a parked task: the wait fails with `reactorUnavailable` and the task goes on
    /// (on the global executor); a task that prefers the reactor afterwards still runs.
    @Test func aShutDownReactorHandsItsTasksToTheGlobalExecutor() async throws {
        let reactor = IOReactor(name: "test.reactor.down")
        let pipe = try PipeResource(reactor: reactor)
        defer { Task { try await pipe.close() } }
        let reader = Task(executorPreference: reactor) { () async -> ResourceKitError.Code? in
            do {
                _ = try await pipe.readByte(boundTo: nil)
                return nil
            } catch {
                return (error as? ResourceKitError)?.code
            }
        }
        try await until("the read parks", reactor.waitingDescriptorCounts()) { $0 > 0 }
        reactor.shutdown()
        #expect(await reader.value == .reactorUnavailable)
        let later = await Task(executorPreference: reactor) { reactor.isCurrentThread ? "reactor" : "elsewhere" }.value
        #expect(later == "elsewhere")
    }
}
