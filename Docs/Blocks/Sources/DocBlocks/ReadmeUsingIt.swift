// README, "Using it": the first block. Glue: the function around the statements, and `MyResource` below.
// snippet: readme-using-it
import ResourceKit

func usingIt() async throws {  // glue
    try await withResourceScope("request", deadline: .now + .seconds(2)) { scope in
        let resource = MyResource()
        let handle = try await scope.register(resource, kind: MyResource.kind, label: "upstream")
        try await resource.read(boundTo: handle)   // cancelled task => throws CancellationError at once
    }                                              // every resource closed here, last acquired first
}  // glue
// end snippet

/// The reader's own resource.
final class MyResource: ManagedResource {
    static let kind = ResourceKind(name: "example.upstream", closeTimeout: .seconds(2))

    func read(boundTo handle: ResourceHandle) async throws {
        try handle.checkCancellation()
    }

    func cancel() {}
    func close() async throws {}
}
