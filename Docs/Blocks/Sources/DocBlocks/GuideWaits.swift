import ResourceKit
import ResourceKitIO
import Synchronization

// The guide, "Waiting without blocking": one block per kind of wait. Glue: the adapter class around each, with
// the stored properties the block uses, and the stand-in library the callback example talks to.

final class PipeReader: Sendable {  // glue
    let output: GuardedDescriptor  // glue
    let handle: ResourceHandle?  // glue
    init(output: GuardedDescriptor, handle: ResourceHandle?) {  // glue
        self.output = output  // glue
        self.handle = handle  // glue
    }  // glue
    // snippet: guide-descriptor
    public func receive(upTo maxBytes: Int) async throws -> [UInt8]? {
        try await output.readSome(upTo: maxBytes, boundTo: handle) { SystemError("read", errno: $0) }
    }
    // end snippet
}  // glue

final class CallbackClient: Sendable {  // glue
    let library: CallbackLibrary  // glue
    let handle: ResourceHandle?  // glue
    init(library: CallbackLibrary, handle: ResourceHandle?) {  // glue
        self.library = library  // glue
        self.handle = handle  // glue
    }  // glue
    func call(_ request: Request) async throws -> Reply {  // glue
        let library = self.library  // glue
        // snippet: guide-cell
        let cell = CancellationCell<Reply>()
        let requestID = Locked<RequestID?>(nil)  // set by the start; onCancel runs after the start returned
        return try await cell.run(boundTo: handle, onCancel: { _ in requestID.withLock { $0 }.map(library.abort) }) {
            cell in
            let id = library.send(request) { reply in cell.succeed(reply) }  // a result after a cancel is dropped
            requestID.withLock { $0 = id }
        }
        // end snippet
    }  // glue
}  // glue

final class WireClient: Sendable {  // glue
    let handle: ResourceHandle?  // glue
    init(handle: ResourceHandle?) { self.handle = handle }  // glue
    func requestCancel(_ id: Int) {}  // glue
    func onTheWire<T>(_ id: Int, _ body: () async throws -> T) async throws -> T {  // glue
        // snippet: guide-operation
        try await withResourceOperation(boundTo: handle, onCancel: { _ in self.requestCancel(id) }) {
            try await body()
        }
        // end snippet
    }  // glue
}  // glue

struct Request: Sendable {}
struct Reply: Sendable {}
struct RequestID: Sendable {}

/// A library with a callback API and its own abort.
protocol CallbackLibrary: Sendable {
    func send(_ request: Request, completion: @escaping @Sendable (Reply) -> Void) -> RequestID
    func abort(_ id: RequestID)
}
