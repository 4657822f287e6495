import ResourceKit
import ResourceKitIO

// The guide, "Descriptors a C library opens and closes itself". Glue: the resource around the block, with the
// stored properties it uses.

final class LibraryTransfer: ManagedResource {  // glue
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
}  // glue
