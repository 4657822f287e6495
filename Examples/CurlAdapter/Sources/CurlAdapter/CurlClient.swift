public import ResourceKit
import ResourceKitIO

/// An HTTP client on libcurl's multi interface, as a resource: an adapter for a C library with its own event loop
/// and its own sockets (Docs/WritingAnAdapter.md, "A library with its own event loop").
///
/// Each request runs on a multi handle of its own, driven by the task that awaits it: one turn of libcurl's loop
/// per `IOReactor.waitForAny`, no thread of its own, no private epoll set. libcurl's sockets go through a
/// `LibraryDescriptors` per request (its open and close hooks).
///
/// Cancellation: a request whose task, scope or deadline is cancelled stops at once: its sockets are shut down
/// (the server sees the connection end) and closed, and `get` throws the cancel's error. Cancelling the client
/// does that to every request in flight.
public final class CurlClient: SynchronouslyClosedResource {
    public static let kind = ResourceKind(name: "example.curl", closeTimeout: .seconds(5))

    /// What every request's path is appended to (`http://127.0.0.1:8080`).
    public let baseURL: String
    private let registration = HandleSlot()
    /// The sockets of each request in flight, for `cancel()` and a leak check.
    private let inFlight = Locked<[ObjectIdentifier: LibraryDescriptors]>([:])

    private init(baseURL: String) {
        self.baseURL = baseURL
    }

    /// A client for `baseURL`, registered in `scope`.
    ///
    /// Cancellation: if `scope` is cancelled the client is closed at once and the call throws.
    public static func open(_ baseURL: String, in scope: ResourceScope) async throws -> CurlClient {
        let client = CurlClient(baseURL: baseURL)
        try await client.registration.register(client, in: scope, kind: kind, label: "curl client")
        return client
    }

    // snippet: curl-get (quoted in Docs/WritingAnAdapter.md)
    /// Sends `GET` for `path` and returns the response.
    ///
    /// Cancellation: a checkpoint first (in a cancelled task or on a cancelled client nothing is sent); a cancel
    /// while it runs shuts the request's sockets down, libcurl closes them, and the call throws the cancel's error.
    /// - Throws: `CancellationError`, `DeadlineExceededError`, ``CurlError``.
    public func get(_ path: String) async throws -> CurlResponse {
        let handle = registration.handle
        try handle?.checkCancellation()
        try Task.checkCancellation()
        let sockets = LibraryDescriptors()
        let transfer = try CurlTransfer(url: baseURL + path, sockets: sockets)
        inFlight.withLock { $0[ObjectIdentifier(sockets)] = sockets }
        defer {
            transfer.finish()  // libcurl closes its sockets through the close hook, before `get` returns
            inFlight.withLock { $0[ObjectIdentifier(sockets)] = nil }
        }
        return try await withResourceOperation(boundTo: handle, onCancel: { _ in _ = sockets.shutdownAll() }) {
            var wake: LoopWake?
            while true {
                if let response = try transfer.drive(wake) { return response }
                wake = try await sockets.reactor.waitForAny(
                    transfer.interests, heldBy: sockets, timer: transfer.timer, boundTo: handle)
            }
        }
    }
    // end snippet

    /// The sockets libcurl holds now for the requests in flight (for a leak check: none once they returned).
    public var openSockets: [Int32] { inFlight.withLock { $0.values.flatMap(\.descriptors) } }

    /// Shuts down the sockets of every request in flight. Non-blocking, idempotent, any thread.
    public func cancel() {
        for sockets in inFlight.withLock({ Array($0.values) }) { _ = sockets.shutdownAll() }
    }

    /// The requests still in flight (in tasks the scope does not wait for) end at once: their handle is closed,
    /// their sockets shut down; each closes its own as it returns.
    public func closeSynchronously() {
        cancel()
    }
}
