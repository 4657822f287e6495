import TestSupport
import Testing

@testable import ResourceKit
@testable import ResourceKitPatterns

@Suite struct OutcomeTests {
    /// The seed's pitfall: `try?` around a cancelled await lets the next statement run. Written with
    /// `withOutcome`, the statement does not run.
    @Test func tryQuestionMarkRunsOnButOutcomeDoesNot() async throws {
        let ranAfterTryQuestionMark = Locked(false)
        let naive = Task {
            try? await Task.sleep(for: .seconds(60))
            ranAfterTryQuestionMark.withLock { $0 = true }  // runs although the task was cancelled
        }
        naive.cancel()
        await naive.value
        #expect(ranAfterTryQuestionMark.withLock { $0 }, "the pitfall reproduces: try? swallowed the cancellation")

        let ranAfterOutcome = Locked(false)
        let seen = Locked<String?>(nil)
        let fixed = Task {
            let outcome = await withOutcome { try await Task.sleep(for: .seconds(60)) }
            seen.withLock { $0 = outcome.name }
            guard case .completed = outcome else { return }
            ranAfterOutcome.withLock { $0 = true }
        }
        fixed.cancel()
        await fixed.value
        #expect(seen.withLock { $0 } == "cancelled")
        #expect(!ranAfterOutcome.withLock { $0 })
    }

    struct AdapterFailure: Error {}

    @Test func classifiesCompletedFailedCancelledAndDeadline() async throws {
        #expect(await withOutcome { 42 }.value == 42)
        let failed = await withOutcome { () async throws -> Int in throw AdapterFailure() }
        guard case .failed(let error) = failed else {
            Issue.record("expected failed, got \(failed.name)")
            return
        }
        #expect(error is AdapterFailure)
        #expect(throws: AdapterFailure.self) { try failed.get() }

        // A deadline through a real pipe: its own outcome, never "failed" and never "cancelled".
        let pipe = try PipeResource()
        let deadline = await withOutcome {
            try await withResourceScope("deadline", deadline: .now + .milliseconds(20), registry: ResourceRegistry()) {
                scope in
                let handle = try await scope.register(pipe, kind: PipeResource.kind, label: "pipe")
                return try await pipe.readByte(boundTo: handle)
            }
        }
        #expect(deadline.name == "deadline")
        #expect(deadline.isStopped)

        // An adapter that reports its teardown as an error of its own, after the task was cancelled, still
        // yields `.cancelled`.
        let task = Task { () -> Outcome<Void> in
            await withOutcome {
                try? await Task.sleep(for: .seconds(60))
                throw AdapterFailure()
            }
        }
        task.cancel()
        #expect(await task.value.name == "cancelled")
        #expect(throws: CancellationError.self) { try Outcome<Int>.cancelled.get() }
    }

    @Test func staleCommitIsDroppedAndCounted() async throws {
        let latest = LatestValue<String>()
        let updates = latest.updates()
        let old = latest.begin()
        let new = latest.begin()
        #expect(!latest.isCurrent(old))
        #expect(latest.commit("new", for: new))
        #expect(!latest.commit("old", for: old), "a superseded ticket never commits")
        #expect(!latest.commit("again", for: new), "a ticket commits at most once")
        #expect(latest.value == "new")
        #expect(latest.droppedCount == 2)
        var iterator = updates.makeAsyncIterator()
        #expect(await iterator.next()?.value == "new")
    }
}
