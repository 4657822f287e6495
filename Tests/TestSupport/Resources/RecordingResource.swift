public import Synchronization

public import ResourceKit
public import ResourceKitTesting

/// A resource that records what ResourceKit did to it, with configurable close behaviour.
public final class RecordingResource: ManagedResource {
    public enum CloseBehaviour: Sendable { case normal, throwing, hanging }

    public struct Failure: Error { public init() {} }

    public let name: String
    public let log: CloseLog
    public let behaviour: CloseBehaviour
    public let cancelCount = Atomic<Int>(0)
    public let closeCount = Atomic<Int>(0)

    public init(_ name: String, log: CloseLog, behaviour: CloseBehaviour = .normal) {
        self.name = name
        self.log = log
        self.behaviour = behaviour
    }

    public func cancel() {
        cancelCount.add(1, ordering: .relaxed)
        log.append("cancel \(name)")
    }

    public func close() async throws {
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
public final class CloseLog: Sendable {
    public init() {}
    /// Observable, so that a test awaits an entry instead of polling for it.
    public let entries = ObservedValue<[String]>([])
    public func append(_ entry: String) { entries.update { $0.append(entry) } }
    public var all: [String] { entries.value }
}
