import CHiredis
import Glibc
import ResourceKit
import ResourceKitIO

/// One hiredis connection in non-blocking mode, driven by the task that uses it: requests are appended to
/// hiredis's buffer and written while the socket takes them; replies are parsed from what the socket has, and the
/// task waits on the reactor in between. hiredis has no socket hooks: its one descriptor is `context.fd`, opened by
/// `redisConnectNonBlock` and closed by `redisFree` (``free()``), and nothing else.
///
/// `@unchecked Sendable`: hiredis's context is not thread-safe, and one user at a time holds the wire (its owner's
/// `ExclusiveLease` through `ServerStop.run`, or the control connection's), so no two threads ever touch it
/// together; ``shutdown()`` only calls `shutdown(2)` on the descriptor, which is thread-safe, and ``free()`` runs
/// once, after every user ended.
final class RedisWire: @unchecked Sendable {
    private let context: UnsafeMutablePointer<redisContext>
    let fd: Int32
    let reactor: IOReactor
    /// Replies sent for and not read yet.
    private(set) var owed = 0
    /// Set once a call failed: what the connection holds is unknown, and it is not used again.
    private let failed = Locked(false)

    /// `true` once a call on the connection failed (any thread may ask).
    var isBroken: Bool { failed.withLock { $0 } }

    private init(context: UnsafeMutablePointer<redisContext>, reactor: IOReactor) {
        self.context = context
        self.fd = context.pointee.fd
        self.reactor = reactor
    }

    /// Connects to `host:port` (an IPv4 or IPv6 literal, or a name), waiting for the connection on the reactor.
    ///
    /// Cancellation: the wait for the connection ends at once with the cancel's error (of the task, or of
    /// `handle`), and the half-open socket is closed.
    static func connect(
        host: String, port: Int, reactor: IOReactor = .shared, boundTo handle: ResourceHandle? = nil,
        deadline: ContinuousClock.Instant? = nil
    ) async throws -> RedisWire {
        guard let context = redisConnectNonBlock(host, Int32(port)) else {
            throw RedisError(.connect, "hiredis could not allocate a context")
        }
        if context.pointee.err != 0 {
            let error = RedisError(.connect, Self.message(context))
            redisFree(context)
            throw error
        }
        let wire = RedisWire(context: context, reactor: reactor)
        do {
            try await reactor.wait(for: wire.fd, .writable, boundTo: handle, deadline: deadline)
            var failure: Int32 = 0
            var size = socklen_t(MemoryLayout<Int32>.size)
            if getsockopt(wire.fd, SOL_SOCKET, SO_ERROR, &failure, &size) != 0 { failure = errno }
            if failure != 0 { throw RedisError(.connect, String(cString: strerror(failure))) }
            return wire
        } catch {
            wire.free()
            throw error
        }
    }

    /// Sends `arguments` as one command and reads its reply.
    ///
    /// Cancellation: each wait ends at once with the cancel's error (of the task or of `handle`); the command may
    /// have been sent, and its reply is then still ``owed``.
    func command(
        _ arguments: [String], boundTo handle: ResourceHandle? = nil, deadline: ContinuousClock.Instant? = nil
    ) async throws -> RedisReply {
        do {
            try append(arguments)
            try await flush(boundTo: handle, deadline: deadline)
            return try await readReply(boundTo: handle, deadline: deadline)
        } catch {
            if handle == nil { failed.withLock { $0 = true } }  // a control command cut short: not reused
            throw error
        }
    }

    /// Appends one command to hiredis's output buffer (nothing is written yet).
    func append(_ arguments: [String]) throws {
        var pointers: [UnsafePointer<CChar>?] = []
        var lengths: [Int] = []
        let copies = arguments.map { strdup($0) }
        defer { copies.forEach { Glibc.free($0) } }
        for (copy, argument) in zip(copies, arguments) {
            pointers.append(UnsafePointer(copy))
            lengths.append(argument.utf8.count)
        }
        guard redisAppendCommandArgv(context, Int32(arguments.count), &pointers, lengths) == REDIS_OK else {
            throw failure(.protocolError)
        }
        owed += 1
    }

    /// Writes hiredis's output buffer, waiting while the socket is full.
    func flush(boundTo handle: ResourceHandle?, deadline: ContinuousClock.Instant?) async throws {
        var done: Int32 = 0
        while true {
            guard redisBufferWrite(context, &done) == REDIS_OK else { throw failure(.connectionLost) }
            if done != 0 { return }
            try await reactor.wait(for: fd, .writable, boundTo: handle, deadline: deadline)
        }
    }

    /// Reads the next reply, waiting while the socket has none.
    func readReply(boundTo handle: ResourceHandle?, deadline: ContinuousClock.Instant?) async throws -> RedisReply {
        while true {
            var raw: UnsafeMutableRawPointer?
            guard redisGetReplyFromReader(context, &raw) == REDIS_OK else { throw failure(.protocolError) }
            if let raw {
                let reply = raw.assumingMemoryBound(to: redisReply.self)
                defer { rk_redis_free_reply(reply) }
                owed -= 1
                return RedisReply(reply)
            }
            try await reactor.wait(for: fd, .readable, boundTo: handle, deadline: deadline)
            guard redisBufferRead(context) == REDIS_OK else { throw failure(.connectionLost) }
        }
    }

    /// Reads and discards every reply still owed, before `deadline`: the drain of a cancelled command. Not bound to
    /// any handle: the connection's owner runs it on a task of its own.
    func drain(until deadline: ContinuousClock.Instant) async throws {
        // A command cancelled in the middle of its write is finished first: its stop is for a command that arrives.
        try await flush(boundTo: nil, deadline: deadline)
        while owed > 0 { _ = try await readReply(boundTo: nil, deadline: deadline) }
    }

    private func failure(_ code: RedisError.Code) -> RedisError {
        failed.withLock { $0 = true }
        return RedisError(code, context.pointee.err != 0 ? Self.message(context) : "hiredis failed")
    }

    private static func message(_ context: UnsafeMutablePointer<redisContext>) -> String {
        withUnsafeBytes(of: context.pointee.errstr) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }

    /// Shuts the socket down: the server sees the connection end, and a read in progress finds the end of the
    /// stream. Thread-safe, idempotent; the descriptor stays open until ``free()``.
    func shutdown() {
        _ = Glibc.shutdown(fd, Int32(SHUT_RDWR))
    }

    /// Closes the socket and frees hiredis's context. Once, after the last use.
    func free() {
        reactor.descriptorWillClose(fd)
        redisFree(context)
    }
}
