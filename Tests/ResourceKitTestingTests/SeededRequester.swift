import Glibc
import ResourceKit
import ResourceKitIO

/// A client that opens a TCP connection per request (as an HTTP library does) and waits for a reply, written the
/// way the guide says (its sockets in a ``LibraryDescriptors``, the wait held by it, the connection shut down from
/// `onCancel` and closed before the request returns), with one seeded bug: the kit must see the per-request socket
/// without a probe of the author's.
final class SeededRequester: ManagedResource {
    enum Bug: Sendable {
        /// A cancelled request leaves its socket open and connected (closed only when the resource closes): the
        /// peer never learns that nobody waits for its answer.
        case leavesSocketOpen
        /// The request waits outside ResourceKit (a detached task, which no cancel reaches) and its `onCancel`
        /// shuts the socket down 200 ms later: the request returns only then, its socket stopped late.
        case shutsDownLate
        /// A cancelled request's socket is shut down at once, then forgotten: taken out of the set, never closed.
        case forgetsToClose
    }

    static let kind = ResourceKind(name: "test.seeded-requester", closeTimeout: .seconds(1))

    let bug: Bug?
    let port: Int
    let sockets = LibraryDescriptors()
    private let handle = Locked<ResourceHandle?>(nil)

    private init(bug: Bug?, port: Int) {
        self.bug = bug
        self.port = port
    }

    static func open(bug: Bug?, port: Int, in scope: ResourceScope) async throws -> SeededRequester {
        let requester = SeededRequester(bug: bug, port: port)
        let handle = try await scope.register(requester, kind: kind, label: "seeded requester")
        requester.handle.withLock { $0 = handle }
        return requester
    }

    /// One request to a peer that never answers: connects, then waits for a reply.
    func request() async throws {
        let handle = handle.withLock { $0 }
        try await withResourceOperation(boundTo: handle, onCancel: { [self] _ in stop() }) {
            let fd = try connect()
            defer {
                switch bug {
                case .leavesSocketOpen: break
                case .forgetsToClose: sockets.remove(fd)
                case nil, .shutsDownLate: sockets.close(fd)
                }
            }
            if bug == .shutsDownLate {
                _ = try await Task.detached { [sockets] in
                    try await sockets.reactor.wait(for: fd, .readable, heldBy: sockets, boundTo: nil, deadline: nil)
                }.value
                return
            }
            _ = try await sockets.reactor.wait(for: fd, .readable, heldBy: sockets, boundTo: handle, deadline: nil)
        }
    }

    private func connect() throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw SystemError.current("socket") }
        sockets.insert(fd)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 || errno == EINPROGRESS else {
            let error = SystemError.current("connect")
            sockets.close(fd)
            throw error
        }
        return fd
    }

    private func stop() {
        switch bug {
        case nil, .forgetsToClose: sockets.shutdownAll()
        case .leavesSocketOpen: break
        case .shutsDownLate:
            Task.detached { [sockets] in
                try? await Task.sleep(for: .milliseconds(200))
                sockets.shutdownAll()
            }
        }
    }

    func cancel() {
        stop()
    }

    func close() async throws {
        for fd in sockets.descriptors { sockets.close(fd) }
    }
}
