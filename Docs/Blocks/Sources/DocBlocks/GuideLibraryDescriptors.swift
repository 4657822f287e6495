import ResourceKit
import ResourceKitIO

// The guide, "Descriptors a C library opens and closes itself". Glue: the resource around the block, with the
// stored properties it uses.

/// A stand-in for a driven C library (libcurl's multi handle): what it wants now, and what it does with a wake.
final class DrivenLibrary: Sendable {  // glue
    var isDone: Bool { true }  // glue
    var interests: [LoopInterest] { [] }  // glue
    var timer: ContinuousClock.Instant? { nil }  // glue
    func act(on wake: LoopWake) {}  // glue
}  // glue

final class LibraryTransfer: ManagedResource {  // glue
    let library = DrivenLibrary()  // glue
    let sockets: LibraryDescriptors  // glue
    let reactor: IOReactor  // glue
    let handle: ResourceHandle?  // glue
    init(reactor: IOReactor, handle: ResourceHandle?) {  // glue
        self.sockets = LibraryDescriptors(reactor: reactor)  // glue
        self.reactor = reactor  // glue
        self.handle = handle  // glue
    }  // glue
    func close() async throws {}  // glue
    // snippet: guide-library-descriptors
    // The library's hooks: every descriptor it opens or closes goes through them.
    func socketOpened(_ fd: Int32) { sockets.insert(fd) }
    func socketClosing(_ fd: Int32) { sockets.close(fd) }

    /// Stops the transfer: every socket the library holds is shut down; the library sees the error and cleans up.
    public func cancel() { sockets.shutdownAll() }

    /// Waits until the library's socket `fd` is ready, as long as the library holds it.
    func waitUntilReady(_ fd: Int32, _ interest: IOInterest) async throws -> IOEvents {
        try await reactor.wait(for: fd, interest, heldBy: sockets, boundTo: handle, deadline: nil)
    }
    // end snippet

    // snippet: guide-driven-loop
    /// Drives the library until the transfer is done. Cancellation: any level wakes the turn at once.
    func perform() async throws {
        while !library.isDone {
            let wake = try await reactor.waitForAny(
                library.interests, heldBy: sockets, timer: library.timer, boundTo: handle)
            library.act(on: wake)  // curl_multi_socket_action on the ready socket, or on the timeout
        }
    }
    // end snippet
}  // glue
