/// A resource as registered, held once: as a ``SynchronouslyClosedResource`` when it is one, so that a scope's end
/// closes it inline (``ResourceHandle/closeInline(timed:)``). Decided where the resource's type is known: the
/// `register` overloads for `some SynchronouslyClosedResource` make ``synchronous(_:)`` with no run-time conformance
/// look-up, the general forms cast (``init(_:)``). One reference, where two fields of the two types cost a retain and a
/// release more (Docs/Architecture.md, "The cost of a scope").
@usableFromInline
enum RegisteredResource: Sendable {
    case general(any ManagedResource)
    case synchronous(any SynchronouslyClosedResource)

    /// `resource`, as a synchronously closed one when its type is one (a run-time conformance look-up).
    @inlinable
    init(_ resource: any ManagedResource) {
        if let synchronous = resource as? any SynchronouslyClosedResource {
            self = .synchronous(synchronous)
        } else {
            self = .general(resource)
        }
    }

    /// The resource, whichever way it closes.
    var resource: any ManagedResource {
        switch self {
        case .general(let resource): resource
        case .synchronous(let resource): resource
        }
    }

    /// The resource when it closes synchronously.
    var synchronous: (any SynchronouslyClosedResource)? {
        guard case .synchronous(let resource) = self else { return nil }
        return resource
    }
}
