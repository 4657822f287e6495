import Foundation
import Glibc
import ResourceKitTesting
import TestSupport
import Testing

@testable import ResourceKit
@_spi(Testing) @testable import ResourceKitIO

/// A group of reactors (Docs/Architecture.md, "A reactor per core"), with real pipes: work handed out in turn
/// reaches every reactor, a task knows which reactor runs it, and a group shut down fails its waits instead of
/// hanging them. The process-wide group shares the process-wide reactor and is never shut down.
@Suite(.timeLimit(.minutes(1))) struct ReactorGroupTests {
    @Test func workHandedOutInTurnReachesEveryReactorAndKnowsWhichRunsIt() async throws {
        let group = IOReactorGroup(count: 3, name: "test.group.turns")
        defer { group.shutdown() }
        #expect(group.count == 3)
        let handedOut = (0..<6).map { _ in group.nextIndex() }
        #expect(handedOut.sorted() == [0, 0, 1, 1, 2, 2], "\(handedOut)")
        #expect(group.currentIndex == nil, "a test's task is not on a reactor's thread")
        for (index, reactor) in group.reactors.enumerated() {
            let seen = await Task(executorPreference: reactor) { group.currentIndex }.value
            #expect(seen == index)
        }
    }

    @Test func aGroupShutDownFailsTheWaitsParkedOnItsReactors() async throws {
        let group = IOReactorGroup(count: 2, name: "test.group.down")
        let pipes = try group.reactors.map { try PipeResource(reactor: $0) }
        let readers = pipes.enumerated().map { index, pipe in
            Task(executorPreference: group.reactors[index]) { () async -> ResourceKitError.Code? in
                do {
                    _ = try await pipe.readByte(boundTo: nil)
                    return nil
                } catch {
                    return (error as? ResourceKitError)?.code
                }
            }
        }
        for reactor in group.reactors {
            try await until("the read parks", reactor.waitingDescriptorCounts()) { $0 > 0 }
        }
        group.shutdown()
        for reader in readers { #expect(await reader.value == .reactorUnavailable) }
        for pipe in pipes { try await pipe.close() }
    }

    @Test func theProcessWideGroupSharesTheSharedReactorAndOutlivesAShutdown() async throws {
        let shared = IOReactorGroup.shared
        #expect(shared.reactors[0] === IOReactor.shared)
        #expect(shared.count == max(1, ProcessInfo.processInfo.activeProcessorCount))
        shared.shutdown()
        for reactor in shared.reactors {
            let pipe = try PipeResource(reactor: reactor)
            let reader = Task(executorPreference: reactor) { try await pipe.readByte(boundTo: nil) }
            try await until("the read parks", reactor.waitingDescriptorCounts()) { $0 > 0 }
            pipe.writeByte()
            #expect(try await reader.value == 1, "a reactor of the shared group stopped")
            try await pipe.close()
        }
    }

    @Test func aCountOutsideTheRangeIsClamped() {
        let group = IOReactorGroup(count: 0, name: "test.group.clamp")
        defer { group.shutdown() }
        #expect(group.count == 1)
    }
}
