public import ResourceKit
public import ResourceKitIO

#if canImport(Glibc)
import Glibc
#endif

/// A connected stream socket (TCP over IPv4/IPv6, or Unix-domain) living in a `ResourceScope`.
///
/// Reading comes from `BufferedByteReader`: `read(upTo:)` (`nil` at the peer's end of stream),
/// `readExactly`, `readLine`, `chunks()`, `lines()`. Only one task may read, and one write, at a time.
///
/// Cancellation: a read, write or connect blocked on this socket resumes immediately with `CancellationError`
/// when its task, the socket's scope or the socket itself is cancelled (with `DeadlineExceededError` when
/// the scope's deadline passes); then the socket is shut down (`shutdown(SHUT_RDWR)`), so later operations fail
/// fast too. The scope's end closes the descriptor exactly once. Peer EOF is not an error; a peer reset,
/// refusal or unreachable network is a ``SocketError``.
public final class SocketConnection: SynchronouslyClosedResource, BufferedByteReader, CustomStringConvertible {
    /// The resource kind of connected sockets.
    public static let kind = ResourceKind(name: "socket", closeTimeout: .seconds(2))

    let descriptor: GuardedDescriptor
    private let registration = HandleSlot()
    /// Read-ahead for `readLine` and friends.
    public let readAhead = ReadAhead()

    init(fd: Int32, reactor: IOReactor) {
        descriptor = GuardedDescriptor(fd, reactor: reactor)
    }

    public var description: String { "SocketConnection(\(descriptor))" }

    /// The descriptor this connection owns while it is open (empty once closed), for the conformance kit's leak
    /// check, which attributes descriptors to the resource under test instead of diffing the whole process.
    @_spi(Testing) public var ownedDescriptors: [Int32] {
        (try? descriptor.withDescriptor { [$0] }) ?? []
    }

    /// The registration of this socket in its scope (`nil` once closed).
    public var handle: ResourceHandle? { registration.handle }

    // MARK: connecting

    /// Resolves `host` and connects to the first address that accepts, registering the socket in `scope`.
    ///
    /// Cancellation: resolution runs on the blocking pool and connecting through the reactor; both stop at
    /// once when the task is cancelled (the scope's deadline, or `deadline`, gives `DeadlineExceededError`).
    /// The socket is registered *before* the connect starts, so a cancellation at any moment closes it.
    /// - Throws: ``SocketError`` (`connectionRefused`, `unreachable`, `timedOut`, `resolutionFailed`, ...).
    ///
    /// - Parameters:
    ///   - host: a host name or a numeric address (resolved on the blocking pool).
    ///   - port: the TCP port.
    ///   - scope: where the socket is registered: a request's scope, or a composed resource's `handle.parts`.
    ///   - deadline: a deadline for resolving and connecting (the scope's deadline applies too).
    ///   - kind: the kind it is registered and counted under: an adapter built on sockets can pass its own.
    ///   - label: its label in the registry (never user data); by default `tcp client` or `unix client`.
    ///   - reactor: the reactor its waits go through.
    public static func connect(
        host: String,
        port: Int,
        in scope: ResourceScope,
        deadline: ContinuousClock.Instant? = nil,
        kind: ResourceKind = SocketConnection.kind,
        label: String? = nil,
        reactor: IOReactor = .shared
    ) async throws -> SocketConnection {
        try scope.checkCancellation()
        let effective = [deadline, scope.deadline].compactMap { $0 }.min()
        let addresses = try await SocketAddress.resolve(host: host, port: port, deadline: effective)
        var lastError: (any Error)?
        for address in addresses {
            do {
                return try await connect(
                    to: address, in: scope, deadline: deadline, kind: kind, label: label, reactor: reactor)
            } catch let error as SocketError {
                lastError = error
            }
        }
        throw lastError ?? SocketError(.resolutionFailed, call: "getaddrinfo", errno: 0)
    }

    /// Connects to a Unix-domain socket at `path`. Cancellation and parameters as
    /// ``connect(host:port:in:deadline:kind:label:reactor:)``.
    public static func connect(
        unixPath path: String, in scope: ResourceScope, deadline: ContinuousClock.Instant? = nil,
        kind: ResourceKind = SocketConnection.kind, label: String? = nil, reactor: IOReactor = .shared
    ) async throws -> SocketConnection {
        try await connect(
            to: .unix(path: path), in: scope, deadline: deadline, kind: kind, label: label, reactor: reactor)
    }

    /// Connects to `address`. Cancellation and parameters as ``connect(host:port:in:deadline:kind:label:reactor:)``.
    public static func connect(
        to address: SocketAddress, in scope: ResourceScope, deadline: ContinuousClock.Instant? = nil,
        kind: ResourceKind = SocketConnection.kind, label: String? = nil, reactor: IOReactor = .shared
    ) async throws -> SocketConnection {
        let fd = socket(
            address.domain, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue),
            0)
        guard fd >= 0 else { throw SocketError.from(errno: Syscall.errno, call: "socket") }
        let connection = SocketConnection(fd: fd, reactor: reactor)
        let handle = try await connection.register(
            in: scope, kind: kind, label: label ?? (address.family == .unix ? "unix client" : "tcp client"))
        do {
            try await connection.finishConnect(to: address, handle: handle, deadline: deadline)
        } catch {
            // Release the descriptor now (not at scope end), so trying the next address does not pile them up.
            await handle.close()
            throw error
        }
        if address.family != .unix { connection.setNoDelay(true) }
        return connection
    }

    func register(in scope: ResourceScope, kind: ResourceKind = SocketConnection.kind, label: String) async throws
        -> ResourceHandle
    {
        try await registration.register(self, in: scope, kind: kind, label: label)
    }

    private func finishConnect(to address: SocketAddress, handle: ResourceHandle, deadline: ContinuousClock.Instant?)
        async throws
    {
        let (done, fd) = try descriptor.withDescriptor { fd -> (Bool, Int32) in
            do {
                _ = try Syscall.value("connect", retryOnInterrupt: false) {
                    address.withSockAddr { Glibc.connect(fd, $0, $1) }
                }
                return (true, fd)
            } catch let error as SystemError where error.errno == EINPROGRESS || error.errno == EINTR {
                return (false, fd)  // completes in the background: wait for writability
            } catch let error as SystemError {
                throw SocketError.from(errno: error.errno, call: "connect")
            }
        }
        if done { return }
        while true {
            try await descriptor.reactor.wait(for: fd, .writable, boundTo: handle, deadline: deadline)
            let connected = try descriptor.withDescriptor { fd -> Bool in
                var pending: Int32 = 0
                var length = socklen_t(MemoryLayout<Int32>.size)
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &pending, &length)
                if pending != 0 { throw SocketError.from(errno: pending, call: "connect") }
                var peer = sockaddr_storage()
                var peerLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
                return withUnsafeMutablePointer(to: &peer) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &peerLength) == 0 }
                }
            }
            if connected { return }
        }
    }

    // MARK: I/O

    /// Reads what is available (at most `maxBytes`, at least one), `nil` at the peer's end of stream.
    /// Prefer `read(upTo:)`, which also drains the read-ahead. Cancellation: see the type's documentation.
    /// - Throws: `CancellationError`, `DeadlineExceededError`, ``SocketError`` (`connectionReset`, ...).
    public func receive(upTo maxBytes: Int) async throws -> [UInt8]? {
        try await receive(upTo: maxBytes, deadline: nil)
    }

    /// Reads what is available, as ``receive(upTo:)``, waiting at most until `deadline`.
    ///
    /// Cancellation: as ``receive(upTo:)``; when `deadline` passes first it throws `DeadlineExceededError` and
    /// the socket stays usable (nothing was consumed).
    public func receive(upTo maxBytes: Int, deadline: ContinuousClock.Instant?) async throws -> [UInt8]? {
        try await descriptor.readSome(upTo: maxBytes, boundTo: handle, deadline: deadline) {
            SocketError.from(errno: $0, call: "recv")
        }
    }

    /// Sends as much of `bytes` as the socket's buffer takes now, without waiting; returns how many bytes went
    /// out (0 when the buffer is full).
    ///
    /// Safe from a cancellation hook (`ManagedResource.cancel()` or the `onCancel` of
    /// `withResourceOperation`): it never waits and takes only the descriptor's own short lock. It is not a
    /// checkpoint (a hook runs in a cancelled task by design). Do not mix it with a `write(_:)` in flight.
    /// - Throws: ``SocketError`` (`brokenPipe`, `connectionReset`, ...), or `ResourceKitError`
    ///   (`descriptorClosed`) once the socket was closed.
    @discardableResult
    public func trySend(_ bytes: some Collection<UInt8>) throws -> Int {
        let data = Array(bytes)
        return try descriptor.withDescriptor { fd -> Int in
            do {
                let sent = try Syscall.nonBlocking("send") {
                    data.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                }
                return sent ?? 0
            } catch let error as SystemError {
                throw SocketError.from(errno: error.errno, call: "send")
            }
        }
    }

    /// Writes all of `bytes`, waiting for the socket to accept more when its buffer is full (backpressure).
    ///
    /// Cancellation: a write waiting for buffer space resumes at once with `CancellationError`; part of the
    /// data may already have been sent.
    /// - Throws: `CancellationError`, `DeadlineExceededError`, ``SocketError`` (`brokenPipe`, `connectionReset`).
    public func write(_ bytes: some Collection<UInt8>) async throws {
        try await write(bytes, deadline: nil)
    }

    /// Writes all of `bytes`, as `write(_:)`, waiting for buffer space at most until `deadline`
    /// (`DeadlineExceededError`; part of the data may already have been sent).
    public func write(_ bytes: some Collection<UInt8>, deadline: ContinuousClock.Instant?) async throws {
        let data = Array(bytes)
        var offset = 0
        if data.isEmpty {
            // `perform` is the checkpoint of every send; an empty write makes none, so it checks here.
            try handle?.checkCancellation()
            try Task.checkCancellation()
        }
        while offset < data.count {
            let sent = try await descriptor.perform(.writable, boundTo: handle, deadline: deadline) { fd -> Int? in
                do {
                    return try Syscall.nonBlocking("send") {
                        data.withUnsafeBytes {
                            Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL))
                        }
                    }
                } catch let error as SystemError {
                    throw SocketError.from(errno: error.errno, call: "send")
                }
            }
            offset += sent
        }
    }

    /// Writes `text` as UTF-8. Cancellation as `write(_:)`.
    public func write(_ text: String) async throws {
        try await write(Array(text.utf8))
    }

    /// Half-close: tells the peer we will send no more (it reads end of stream); reading still works.
    public func shutdownWrite() throws {
        try descriptor.withDescriptor { fd in
            if Glibc.shutdown(fd, Int32(SHUT_WR)) != 0 {
                throw SocketError.from(errno: Syscall.errno, call: "shutdown")
            }
        }
    }

    /// Abortive close: the peer gets a reset (RST) instead of an orderly end of stream, and the descriptor is
    /// closed now. The resource stays registered until its scope ends (closing it again is a no-op).
    public func resetConnection() {
        descriptor.ifOpen { fd in try? Syscall.setAbortiveClose(fd) }
        descriptor.close()
    }

    /// Turns Nagle's algorithm off (on by default for TCP connections made or accepted here: request/response
    /// line protocols want their small writes sent at once).
    public func setNoDelay(_ on: Bool) {
        descriptor.ifOpen { fd in
            try? Syscall.setSocketOption(fd, level: Int32(IPPROTO_TCP), name: TCP_NODELAY, value: on ? 1 : 0)
        }
    }

    /// Bounds how long a TCP peer that vanished (no FIN, no reset: its host gone, its packets dropped) goes unnoticed:
    /// keepalive probes begin after a quarter of `bound` without traffic and give up after three unanswered ones,
    /// all within `bound`, and data left unacknowledged for `bound` (`TCP_USER_TIMEOUT`) ends the connection. Then a
    /// blocked read or write fails with ``SocketError/Code-swift.struct/timedOut``. Whole seconds, at least 4; no
    /// effect on a Unix-domain socket or a closed one. ``SocketServer`` sets it on every connection it accepts.
    public func setPeerSilenceBound(_ bound: Duration) {
        // At most 2,000,000 s, so that the timeout's milliseconds fit `TCP_USER_TIMEOUT`'s int.
        let seconds = Int32(min(max(4, bound.components.seconds), 2_000_000))
        let idle = max(1, seconds / 4)
        let interval = max(1, (seconds - idle) / 3)
        descriptor.ifOpen { fd in
            try? Syscall.setSocketOption(fd, level: SOL_SOCKET, name: SO_KEEPALIVE, value: 1)
            try? Syscall.setSocketOption(fd, level: Int32(IPPROTO_TCP), name: TCP_KEEPIDLE, value: idle)
            try? Syscall.setSocketOption(fd, level: Int32(IPPROTO_TCP), name: TCP_KEEPINTVL, value: interval)
            try? Syscall.setSocketOption(fd, level: Int32(IPPROTO_TCP), name: TCP_KEEPCNT, value: 3)
            try? Syscall.setSocketOption(fd, level: Int32(IPPROTO_TCP), name: TCP_USER_TIMEOUT, value: seconds * 1000)
        }
    }

    /// The local address.
    public var localAddress: SocketAddress? {
        (try? descriptor.withDescriptor { fd in Self.address(of: fd, peer: false) }) ?? nil
    }

    /// The peer's address.
    public var remoteAddress: SocketAddress? {
        (try? descriptor.withDescriptor { fd in Self.address(of: fd, peer: true) }) ?? nil
    }

    static func address(of fd: Int32, peer: Bool) -> SocketAddress? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        return withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                let result = peer ? getpeername(fd, sa, &length) : getsockname(fd, sa, &length)
                return result == 0 ? SocketAddress(sa, length: length) : nil
            }
        }
    }

    /// Ends this side's output (`shutdown(SHUT_WR)`: the peer reads its end of input) and reads what the peer still
    /// sends, discarding it, until the peer's end of input, at most 1 MiB and `within` (500 ms by default, Go's
    /// `net/http` `rstAvoidanceDelay`). Closing a socket with input unread makes the kernel send a reset, and a peer
    /// that receives one fails its next read with `ECONNRESET`, the answers it had not read yet lost; a server calls
    /// this before it closes a connection whose client may still be sending (a request pipelined behind the last
    /// one answered, an over-long request refused).
    ///
    /// Cancellation: cancelling the calling task ends the draining at once. Never throws: a connection that fails
    /// meanwhile has nothing left to protect.
    public func endOutputAndDrain(within: Duration = .milliseconds(500)) async {
        guard (try? shutdownWrite()) != nil else { return }
        let until = ContinuousClock.now + within
        var discarded = 0
        while discarded < 1 << 20, let chunk = try? await receive(upTo: 65_536, deadline: until) {
            discarded += chunk.count
        }
    }

    // MARK: ManagedResource

    /// Shuts the socket down in both directions (any thread, non-blocking, idempotent); blocked operations
    /// were already resumed by ResourceKit.
    public func cancel() {
        descriptor.ifOpen { fd in _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
    }

    /// Closes the descriptor (exactly once).
    public func closeSynchronously() {
        descriptor.close()
    }
}
