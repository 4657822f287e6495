// README's and the guide's statement of the contract, as the protocol they show. Glue: a namespace each, so
// that they do not stand in for ResourceKit's own `ManagedResource`.

enum ReadmeContract {  // glue
    // snippet: readme-contract
    public protocol ManagedResource: AnyObject, Sendable {
        func cancel()              // synchronous, non-blocking, idempotent, any thread, maybe before the operation
        func close() async throws  // exactly once, last acquired first, shielded, bounded by the kind's timeout
    }
    // end snippet
}

enum GuideContract {  // glue
    // snippet: guide-contract
    public protocol ManagedResource: AnyObject, Sendable {
        func cancel()                 // stop now: synchronous, non-blocking, idempotent, any thread
        func close() async throws     // release everything: called exactly once, shielded, bounded
    }
    // end snippet
}
