import CLibPQ

#if canImport(Glibc)
import Glibc
#endif

/// A `PGconn *`, and the socket as libpq holds it now. `@unchecked Sendable`: libpq connections are not
/// thread-safe, so every libpq call on it is serialised: while open, the calls are made holding the owning
/// connection's `state` lock; `close()` takes the value out of the state under that lock (so no other call can
/// reach it any more) and only then calls `PQfinish` outside the lock, as the sole remaining user.
struct LibPQConnection: @unchecked Sendable {
    let raw: OpaquePointer

    /// The socket libpq holds now, `-1` when it holds none. Asked of libpq each time, never kept: libpq closes its
    /// socket itself when the connection is lost (and may open another while it connects), and a number kept
    /// from before may name a stranger's descriptor by then.
    var socket: Int32 { PQsocket(raw) }

    /// Shuts the socket down in both directions (non-blocking), if libpq still holds one: the server ends the
    /// session, and a wait on the socket wakes. The descriptor stays libpq's, closed by `PQfinish`.
    func shutDown() {
        let fd = socket
        if fd >= 0 { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
    }

    /// Whether the server sent something (bytes, or the end of the stream) that is waiting to be read, without
    /// waiting. `false` when libpq holds no socket.
    var hasInputWaiting: Bool {
        var entry = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        return entry.fd >= 0 && poll(&entry, 1, 0) > 0
    }

    /// Corks (`on`) or uncorks the TCP socket around a carried session reset and the statement behind it. libpq
    /// 15's `PQpipelineSync` flushes, so the reset's sync and the statement's would leave as two writes: two
    /// segments, two wake-ups of the server. Corked, they leave as one segment when uncorked. A Unix socket refuses
    /// the option, and nothing changes there; without a socket, nothing is done.
    func cork(_ on: Bool) {
        let fd = socket
        guard fd >= 0 else { return }
        var value: Int32 = on ? 1 : 0
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_CORK, &value, socklen_t(MemoryLayout<Int32>.size))
    }
}

/// A `PGcancel *`. `@unchecked Sendable`: libpq documents `PQcancel` as safe to call from any thread (it only
/// reads the object); it is freed only after the last cancel request that uses it finished. Equal when they are
/// the same object.
struct PGCancelPointer: @unchecked Sendable, Equatable {
    let raw: OpaquePointer
}
