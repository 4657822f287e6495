public import ResourceKit
public import ResourceKitIO

#if canImport(Glibc)
import Glibc
#endif

/// A listening socket (TCP or Unix-domain) living in a `ResourceScope`.
///
/// Cancellation: ``accept(in:reactor:)`` blocked on an idle listener resumes immediately with `CancellationError` when
/// its task, the listener's scope or the listener is cancelled; cancelling the listener also shuts it down.
/// Accepted connections belong to the scope passed to ``accept(in:reactor:)``. A server that gives each connection a
/// scope of its own, with backpressure and a backoff when descriptors run out, uses
/// ``SocketServer/serve(_:configuration:handler:)`` instead.
public final class SocketListener: SynchronouslyClosedResource, CustomStringConvertible {
    /// The resource kind of listeners.
    public static let kind = ResourceKind(name: "socket.listener", closeTimeout: .seconds(2))

    let descriptor: GuardedDescriptor
    private let registration = HandleSlot()
    /// The bound address (with the actual port when 0 was asked for).
    public let localAddress: SocketAddress
    private let unixPath: String?

    private init(fd: Int32, address: SocketAddress, reactor: IOReactor) {
        descriptor = GuardedDescriptor(fd, reactor: reactor)
        localAddress = address
        unixPath = address.unixPath
    }

    public var description: String { "SocketListener(\(localAddress))" }

    /// The descriptor this listener owns while it is open (empty once closed), for the conformance kit's leak
    /// check.
    @_spi(Testing) public var ownedDescriptors: [Int32] {
        (try? descriptor.withDescriptor { [$0] }) ?? []
    }

    /// The bound port (TCP).
    public var port: Int { localAddress.port ?? 0 }

    /// Binds and listens on `host:port` (port 0 picks a free one), with `SO_REUSEADDR`.
    /// - Throws: ``SocketError`` (`addressInUse`, `addressNotAvailable`, `resolutionFailed`), or the scope's
    ///   cancellation.
    public static func bind(
        host: String = "127.0.0.1",
        port: Int = 0,
        backlog: Int32 = 511,
        in scope: ResourceScope,
        reactor: IOReactor = .shared
    ) async throws -> SocketListener {
        try scope.checkCancellation()
        let addresses = try await SocketAddress.resolve(host: host, port: port, deadline: scope.deadline)
        return try await bind(to: addresses[0], backlog: backlog, in: scope, reactor: reactor)
    }

    /// Binds and listens on a Unix-domain socket at `path` (which must not exist; it is removed on close).
    public static func bind(
        unixPath path: String, backlog: Int32 = 511, in scope: ResourceScope, reactor: IOReactor = .shared
    ) async throws -> SocketListener {
        try await bind(to: .unix(path: path), backlog: backlog, in: scope, reactor: reactor)
    }

    /// Binds and listens on `address`.
    public static func bind(
        to address: SocketAddress, backlog: Int32 = 511, in scope: ResourceScope, reactor: IOReactor = .shared
    ) async throws -> SocketListener {
        try scope.checkCancellation()
        let fd = socket(
            address.domain, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue),
            0)
        guard fd >= 0 else { throw SocketError.from(errno: Syscall.errno, call: "socket") }
        if address.family != .unix {
            try? Syscall.setSocketOption(fd, level: SOL_SOCKET, name: SO_REUSEADDR, value: 1)
        }
        if address.withSockAddr({ Glibc.bind(fd, $0, $1) }) != 0 {
            let error = SocketError.from(errno: Syscall.errno, call: "bind")
            Syscall.close(fd)
            throw error
        }
        if Glibc.listen(fd, backlog) != 0 {
            let error = SocketError.from(errno: Syscall.errno, call: "listen")
            Syscall.close(fd)
            throw error
        }
        let bound = SocketConnection.address(of: fd, peer: false) ?? address
        let listener = SocketListener(fd: fd, address: address.family == .unix ? address : bound, reactor: reactor)
        try await listener.registration.register(
            listener, in: scope, kind: kind, label: address.family == .unix ? "unix listener" : "tcp listener")
        return listener
    }

    /// Waits for the next connection and registers it in `scope`.
    ///
    /// - Parameters:
    ///   - scope: the scope that owns the accepted connection.
    ///   - reactor: the reactor the accepted connection's waits go through; the listener's when `nil`. Give the
    ///     reactor whose thread runs the connection's task (a reactor of an `IOReactorGroup` the task prefers as
    ///     its executor), so that its reads and writes resume on that thread.
    ///
    /// Cancellation: see the type's documentation. A connection accepted at the instant the scope is
    /// cancelled is closed at once (registration into a cancelled scope), never leaked.
    /// - Throws: `CancellationError`, `DeadlineExceededError`, ``SocketError``.
    public func accept(in scope: ResourceScope, reactor: IOReactor? = nil) async throws -> SocketConnection {
        let handle = registration.handle
        let fd = try await descriptor.perform(.readable, boundTo: handle) { listening -> Int32? in
            do {
                return try Syscall.acceptNonBlocking(listening)
            } catch let error as SystemError where error.errno == ECONNABORTED || error.errno == EPROTO {
                return nil  // a connection that died in the queue is not our failure: wait for the next one
            } catch let error as SystemError {
                throw SocketError.from(errno: error.errno, call: "accept")
            }
        }
        let connection = SocketConnection(fd: fd, reactor: reactor ?? descriptor.reactor)
        _ = try await connection.register(in: scope, label: "accepted")
        if localAddress.family != .unix { connection.setNoDelay(true) }
        return connection
    }

    /// What one accept of ``SocketServer``'s loop gave.
    enum AcceptOutcome: Sendable {
        /// A connection, owned by nobody yet: the caller registers it in a scope at once.
        case accepted(Int32)
        /// Out of descriptors or kernel memory: the loop backs off (``AcceptBackoff``).
        case exhausted(SocketError)
    }

    /// Waits for the next connection and returns its descriptor, or the lack of descriptors or memory that kept it in
    /// the queue: a listener stays readable then, and waiting again at once would spin.
    ///
    /// Cancellation: as ``accept(in:reactor:)``.
    func acceptDescriptor() async throws -> AcceptOutcome {
        try await descriptor.perform(.readable, boundTo: registration.handle) { listening -> AcceptOutcome? in
            do {
                return try Syscall.acceptNonBlocking(listening).map { .accepted($0) }
            } catch let error as SystemError where [ECONNABORTED, EPROTO, EPERM].contains(error.errno) {
                return nil  // one connection failed in the queue (or a firewall refused it): wait for the next one
            } catch let error as SystemError where [EMFILE, ENFILE, ENOBUFS, ENOMEM].contains(error.errno) {
                return .exhausted(SocketError.from(errno: error.errno, call: "accept"))
            } catch let error as SystemError {
                throw SocketError.from(errno: error.errno, call: "accept")
            }
        }
    }

    /// Shuts the listener down (wakes nothing by itself: ResourceKit already resumed blocked accepts).
    public func cancel() {
        descriptor.ifOpen { fd in _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
    }

    /// Closes the descriptor exactly once and removes a Unix socket's path.
    public func closeSynchronously() {
        if descriptor.close(), let unixPath {
            unlink(unixPath)
        }
    }
}
