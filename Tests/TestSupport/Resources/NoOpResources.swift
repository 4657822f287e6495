public import ResourceKit

/// A resource that does nothing when cancelled or closed: for tests of decisions that never reach the resource
/// (state machines as values).
public final class NoOpResource: ManagedResource {
    public init() {}
    public func cancel() {}
    public func close() async throws {}
}

/// ``NoOpResource`` that closes synchronously (a scope's end closes it inline).
public final class NoOpInlineResource: SynchronouslyClosedResource {
    public init() {}
    public func cancel() {}
    public func closeSynchronously() throws {}
}
