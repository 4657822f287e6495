import ResourceKit
import ResourceKitObservation
import ResourceKitTesting
import Synchronization
import TestSupport
import Testing

/// `resourcekit_operations_total`'s source: each `withResourceOperation` bound to a handle counts one outcome in its
/// kind, whichever level stopped it, and an adapter counts its own operations through the handle.
@Suite struct OperationOutcomeTests {
    struct Refused: Error {}

    /// A kind of its own, so that other suites' pipes do not add to the counts.
    static let kind = ResourceKind(name: "test.operations", closeTimeout: .seconds(2))

    @Test func errorsAreClassified() {
        #expect(OperationOutcome(error: CancellationError()) == .cancelled)
        #expect(OperationOutcome(error: DeadlineExceededError(deadline: .now)) == .deadlineExceeded)
        #expect(OperationOutcome(error: Refused()) == .failed)
        #expect(
            OperationOutcome.allCases.map(\.metricLabel) == ["completed", "cancelled", "deadline_exceeded", "failed"])
    }

    @Test func eachOperationCountsOneOutcome() async throws {
        let registry = ResourceRegistry()
        try await withResourceScope("owner", registry: registry) { scope in
            let pipe = try PipeResource()
            let handle = try await scope.register(pipe, kind: Self.kind, label: "pipe")
            try await withResourceOperation(boundTo: handle, onCancel: { _ in }) {}
            try await withResourceOperation(boundTo: handle, onCancel: { _ in }) {}
            await #expect(throws: Refused.self) {
                try await withResourceOperation(boundTo: handle, onCancel: { _ in }) { throw Refused() }
            }
            // Its own deadline, while the body waits (the wait resumes with the deadline's error).
            await #expect(throws: DeadlineExceededError.self) {
                try await withResourceOperation(boundTo: handle, deadline: .now + .milliseconds(20), onCancel: { _ in })
                {
                    _ = try await pipe.readByte(boundTo: handle)
                }
            }
            // Its task cancelled (the resource lives on: an operation-level cancel).
            let started = OneShotEvent()
            let cancelled = Task {
                try await withResourceOperation(boundTo: handle, onCancel: { _ in }) {
                    started.set()
                    _ = try await pipe.readByte(boundTo: handle)
                }
            }
            try await started.wait()
            cancelled.cancel()
            await #expect(throws: CancellationError.self) { try await cancelled.value }
            // An adapter's own count, and an operation not bound to a handle (not counted: it has no kind).
            handle.recordOperation(.failed)
            try await withResourceOperation(boundTo: nil, onCancel: { _ in }) {}
            #expect(handle.isCancelled == false)
        }
        let counts = registry.snapshot().counters[Self.kind.name]?.operations ?? [:]
        #expect(counts == [.completed: 2, .failed: 2, .deadlineExceeded: 1, .cancelled: 1])
        #expect(registry.snapshot().totals.operations[.completed] == 2)
    }

    @Test func aPoolStyleCountWithoutAHandleShowsItsKind() {
        let registry = ResourceRegistry()
        let kind = ResourceKind(name: "test.operations.unseen")
        registry.recordOperation(.completed, kind: kind)
        registry.recordOperation(.completed, kind: kind)
        #expect(registry.snapshot().counters[kind.name]?.operations[.completed] == 2)
    }
}
