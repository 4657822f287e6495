import CSystemShims
import Glibc
import ResourceKit
import Testing

@_spi(Testing) import ResourceKitIO

/// ``LibraryDescriptors`` through real sockets: what the library holds is shut down by a cancel, what it gave back
/// is never touched, and reactor waits register only on what it holds.
@Suite(.serialized) struct LibraryDescriptorsTests {
    /// A connected, non-blocking socket pair: `library` is the end a C library would own, `peer` the far end.
    struct Pair {
        let library: Int32
        let peer: Int32

        init() throws {
            var fds: [Int32] = [0, 0]
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &fds) == 0 else {
                throw SystemError.current("socketpair")
            }
            library = fds[0]
            peer = fds[1]
        }

        /// What the peer sees: `0` at the end of the stream (the library's end was shut down), `-1` with `EAGAIN`
        /// while the connection is up and quiet.
        func peerRead() -> Int {
            var byte: UInt8 = 0
            return recv(peer, &byte, 1, Int32(MSG_DONTWAIT))
        }

        func close() {
            Glibc.close(library)
            Glibc.close(peer)
        }
    }

    @Test func shutdownAllReachesWhatTheLibraryHoldsOnly() throws {
        let set = LibraryDescriptors()
        let held = try Pair()
        let givenBack = try Pair()
        defer {
            held.close()
            givenBack.close()
        }
        set.insert(held.library)
        set.insert(givenBack.library)
        #expect(set.remove(givenBack.library))
        #expect(!set.remove(givenBack.library), "a second removal finds nothing")
        #expect(set.descriptors == [held.library])
        #expect(set.shutdownAll() == 1)
        #expect(held.peerRead() == 0, "the held socket was shut down: its peer reads the end")
        #expect(givenBack.peerRead() == -1 && errno == EAGAIN, "the given-back number was not touched")
    }

    /// A number the library gave back and a stranger then got: neither a cancel nor a wait reaches it.
    @Test func aReusedNumberIsAStrangers() async throws {
        let reactor = IOReactor(name: "test.reactor.library")
        defer { reactor.shutdown() }
        let set = LibraryDescriptors(reactor: reactor)
        let library = try Pair()
        // On a number nothing else in the process is given (the lowest free one always goes first): a stranger
        // pair made below cannot land on it by chance, only through the explicit reuse.
        let number = fcntl(library.library, F_DUPFD_CLOEXEC, 17_100)
        Glibc.close(library.library)
        set.insert(number)
        #expect(set.close(number))
        let stranger = try Pair()
        defer {
            stranger.close()
            Glibc.close(library.peer)
        }
        guard dup2(stranger.library, number) == number else { throw SystemError.current("dup2") }
        defer { Glibc.close(number) }
        #expect(set.shutdownAll() == 0)
        #expect(stranger.peerRead() == -1 && errno == EAGAIN, "the stranger's socket was not shut down")
        await #expect {
            try await reactor.wait(for: number, .readable, heldBy: set, boundTo: nil, deadline: .now + .seconds(2))
        } throws: { error in
            (error as? ResourceKitError)?.code == .descriptorClosed
        }
        #expect(reactor.waitingDescriptorCount == 0)
    }

    /// A wait on a held descriptor: a cancel's `shutdownAll()` wakes it; the library's removal while it is parked
    /// fails it with `descriptorClosed`.
    @Test func heldWaitsWakeOnShutdownAndFailOnRemoval() async throws {
        let reactor = IOReactor(name: "test.reactor.library.waits")
        defer { reactor.shutdown() }
        let set = LibraryDescriptors(reactor: reactor)
        let first = try Pair()
        let third = try Pair()
        defer {
            first.close()
            third.close()
        }
        set.insert(first.library)

        // Owner: this test, which awaits it.
        let woken = Task {
            try await reactor.wait(for: first.library, .readable, heldBy: set, boundTo: nil, deadline: nil)
        }
        for await count in reactor.waitingDescriptorCounts() where count > 0 { break }
        set.shutdownAll()
        #expect(try await woken.value.contains(.readable))

        set.insert(third.library)
        // Fill the socket so that a writability wait parks.
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while send(third.library, &chunk, chunk.count, Int32(MSG_DONTWAIT)) > 0 {}
        // Owner: this test, which awaits it.
        let parked = Task {
            try await reactor.wait(for: third.library, .writable, heldBy: set, boundTo: nil, deadline: nil)
        }
        for await count in reactor.waitingDescriptorCounts() where count > 0 { break }
        set.remove(third.library)
        await #expect {
            try await parked.value
        } throws: { error in
            (error as? ResourceKitError)?.code == .descriptorClosed
        }
    }

    /// A library with no hooks: the set follows the library's current socket after each call. A number that left
    /// fails its waits; a shutdown reaches only the current one.
    @Test func refreshFollowsAHooklessLibrarysCurrentSocket() async throws {
        let reactor = IOReactor(name: "test.reactor.library.refresh")
        defer { reactor.shutdown() }
        let set = LibraryDescriptors(reactor: reactor)
        let old = try Pair()
        let new = try Pair()
        defer {
            old.close()
            new.close()
        }
        set.refresh(current: old.library)
        #expect(set.descriptors == [old.library])
        // Owner: this test, which awaits it.
        let parked = Task {
            try await reactor.wait(for: old.library, .readable, heldBy: set, boundTo: nil, deadline: nil)
        }
        for await count in reactor.waitingDescriptorCounts() where count > 0 { break }
        set.refresh(current: new.library)  // the library reconnected inside its last call
        await #expect {
            try await parked.value
        } throws: { error in
            (error as? ResourceKitError)?.code == .descriptorClosed
        }
        #expect(set.descriptors == [new.library])
        set.shutdownAll()
        #expect(new.peerRead() == 0)
        #expect(old.peerRead() == -1, "the number the library gave back was not shut down")
        set.refresh(current: nil)
        #expect(set.descriptors.isEmpty)
    }
}
