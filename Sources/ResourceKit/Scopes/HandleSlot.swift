/// Where a resource keeps the ``ResourceHandle`` it got at registration, so that its operations can bind to
/// it: register through the slot and read ``handle`` in operations. Keep it after `close()`: the closed handle
/// makes ``ResourceHandle/checkCancellation()`` throw, so an operation called after close fails instead of running
/// unbound (the handle lets go of the resource when it closes, so keeping it makes no cycle).
///
/// ```swift
/// public final class Upstream: SynchronouslyClosedResource {
///     private let registration = HandleSlot()
///
///     public static func open(in scope: ResourceScope) async throws -> Upstream {
///         let upstream = Upstream()
///         try await upstream.registration.register(upstream, in: scope, kind: kind, label: "upstream")
///         return upstream
///     }
///
///     public func read() async throws -> [UInt8]? {
///         try await descriptor.readSome(upTo: 4096, boundTo: registration.handle) { SystemError("read", errno: $0) }
///     }
///
///     public func closeSynchronously() {
///         descriptor.close()
///     }
/// }
/// ```
public final class HandleSlot: Sendable {
    private let slot = Locked<ResourceHandle?>(nil)

    /// An empty slot.
    public init() {}

    /// The registration: `nil` before ``register(_:in:kind:label:)-(ManagedResource,_,_,_)`` (and after ``clear()``);
    /// closed after the resource closed.
    public var handle: ResourceHandle? { slot.withLock { $0 } }

    /// Registers `resource` in `scope` and keeps the handle.
    ///
    /// Cancellation: as ``ResourceScope/register(_:kind:label:)-(ManagedResource,_,_)``: a cancelled scope cancels and
    /// closes the resource at once and the call throws (the slot stays empty).
    @discardableResult
    public func register(
        _ resource: some ManagedResource,
        in scope: ResourceScope,
        kind: ResourceKind,
        label: String
    ) async throws -> ResourceHandle {
        kept(try await scope.register(resource, kind: kind, label: label))
    }

    /// Registers `resource` in `scope` and keeps the handle: the same as the general form,
    /// ``register(_:in:kind:label:)-(ManagedResource,_,_,_)``, chosen by the compiler for a resource that closes
    /// synchronously (it then needs no run-time conformance look-up, even where the call is not specialised).
    ///
    /// Cancellation: as ``ResourceScope/register(_:kind:label:)-(ManagedResource,_,_)``: a cancelled scope cancels and
    /// closes the resource at once and the call throws (the slot stays empty).
    @discardableResult
    public func register(
        _ resource: some SynchronouslyClosedResource,
        in scope: ResourceScope,
        kind: ResourceKind,
        label: String
    ) async throws -> ResourceHandle {
        kept(try await scope.register(resource, kind: kind, label: label))
    }

    private func kept(_ handle: ResourceHandle) -> ResourceHandle {
        keep(handle)
        return handle
    }

    /// Keeps a handle obtained some other way (``ResourceRegistry/register(_:kind:label:)``).
    public func keep(_ handle: ResourceHandle) {
        slot.withLock { $0 = handle }
    }

    /// Forgets the handle. Rarely wanted: afterwards ``handle`` is `nil` and operations that bind to it run
    /// unbound. Do not call it from `close()` (keep the closed handle: its checks throw).
    public func clear() {
        slot.withLock { $0 = nil }
    }
}
