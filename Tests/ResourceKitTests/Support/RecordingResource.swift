import Synchronization

@testable import ResourceKit
import ResourceKitTesting
import TestSupport

/// A resource that records what ResourceKit did to it, with configurable close behaviour.
final class RecordingResource: ManagedResource {
    enum CloseBehaviour: Sendable { case normal, throwing, hanging }

    struct Failure: Error {}

    let name: String
    let log: CloseLog
    let behaviour: CloseBehaviour
    let cancelCount = Atomic<Int>(0)
    let closeCount = Atomic<Int>(0)

    init(_ name: String, log: CloseLog, behaviour: CloseBehaviour = .normal) {
        self.name = name
        self.log = log
        self.behaviour = behaviour
    }

    func cancel() {
        cancelCount.add(1, ordering: .relaxed)
        log.append("cancel \(name)")
    }

    func close() async throws {
        closeCount.add(1, ordering: .relaxed)
        log.append("close \(name)")
        switch behaviour {
        case .normal: return
        case .throwing: throw Failure()
        case .hanging:
            // Ignores cancellation on purpose: a badly behaved adapter.
            do { try await Task.sleep(for: .seconds(3600)) } catch {}
        }
    }
}

/// An ordered, thread-safe log.
final class CloseLog: Sendable {
    /// Observable, so that a test awaits an entry instead of polling for it.
    let entries = ObservedValue<[String]>([])
    func append(_ entry: String) { entries.update { $0.append(entry) } }
    var all: [String] { entries.value }
}
