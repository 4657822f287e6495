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

/// The libpq calls the connection makes, one each, named after libpq's own (`PQflush` is `flush()`) and returning
/// what it returns: libpq's connection-level API is called nowhere else in the module (results, once taken, are
/// read where they are decoded). Every call is made under the owning connection's lock, as the type's comment says.
extension LibPQConnection {
    // MARK: the connection's life

    /// Starts a non-blocking connect (`PQconnectStartParams`) with the given keyword and value arrays; `nil` when
    /// libpq could not allocate the connection.
    static func start(
        _ keywords: UnsafePointer<UnsafePointer<CChar>?>, _ values: UnsafePointer<UnsafePointer<CChar>?>
    ) -> LibPQConnection? {
        PQconnectStartParams(keywords, values, 0).map(LibPQConnection.init(raw:))
    }

    func setNoticeReceiver(_ receiver: PQnoticeReceiver, _ argument: UnsafeMutableRawPointer?) {
        _ = PQsetNoticeReceiver(raw, receiver, argument)
    }

    // MARK: the connection's state

    func status() -> ConnStatusType { PQstatus(raw) }
    func errorMessage() -> UnsafeMutablePointer<CChar>! { PQerrorMessage(raw) }
    /// libpq's last error message, without its trailing newline.
    var errorText: String { String(cString: PQerrorMessage(raw)).trimmingSpaces }
    func transactionStatus() -> PGTransactionStatusType { PQtransactionStatus(raw) }
    func backendPID() -> Int32 { PQbackendPID(raw) }
    func getCancel() -> OpaquePointer? { PQgetCancel(raw) }
    func connectPoll() -> PostgresPollingStatusType { PQconnectPoll(raw) }
    @discardableResult func setnonblocking(_ on: Int32) -> Int32 { PQsetnonblocking(raw, on) }
    func finish() { PQfinish(raw) }

    // MARK: sending

    func sendQuery(_ sql: UnsafePointer<CChar>) -> Int32 { PQsendQuery(raw, sql) }

    func sendQueryParams(
        _ sql: UnsafePointer<CChar>, _ count: Int32, _ types: UnsafePointer<Oid>?,
        _ values: UnsafePointer<UnsafePointer<CChar>?>?, _ lengths: UnsafePointer<Int32>?,
        _ formats: UnsafePointer<Int32>?, _ resultFormat: Int32
    ) -> Int32 {
        PQsendQueryParams(raw, sql, count, types, values, lengths, formats, resultFormat)
    }

    func sendPrepare(
        _ name: UnsafePointer<CChar>, _ sql: UnsafePointer<CChar>, _ count: Int32, _ types: UnsafePointer<Oid>?
    ) -> Int32 {
        PQsendPrepare(raw, name, sql, count, types)
    }

    func sendQueryPrepared(
        _ name: UnsafePointer<CChar>, _ count: Int32, _ values: UnsafePointer<UnsafePointer<CChar>?>?,
        _ lengths: UnsafePointer<Int32>?, _ formats: UnsafePointer<Int32>?, _ resultFormat: Int32
    ) -> Int32 {
        PQsendQueryPrepared(raw, name, count, values, lengths, formats, resultFormat)
    }

    @discardableResult func setSingleRowMode() -> Int32 { PQsetSingleRowMode(raw) }
    func flush() -> Int32 { PQflush(raw) }

    // MARK: pipelines

    func enterPipelineMode() -> Int32 { PQenterPipelineMode(raw) }
    func exitPipelineMode() -> Int32 { PQexitPipelineMode(raw) }
    func pipelineSync() -> Int32 { PQpipelineSync(raw) }
    func pipelineStatus() -> PGpipelineStatus { PQpipelineStatus(raw) }

    // MARK: reading

    func consumeInput() -> Int32 { PQconsumeInput(raw) }
    func isBusy() -> Int32 { PQisBusy(raw) }
    func getResult() -> OpaquePointer? { PQgetResult(raw) }
    func notifies() -> UnsafeMutablePointer<PGnotify>? { PQnotifies(raw) }

    // MARK: COPY

    func putCopyData(_ buffer: UnsafePointer<CChar>?, _ count: Int32) -> Int32 { PQputCopyData(raw, buffer, count) }
    func putCopyEnd(_ message: UnsafePointer<CChar>?) -> Int32 { PQputCopyEnd(raw, message) }

    func getCopyData(_ buffer: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>, _ async: Int32) -> Int32 {
        PQgetCopyData(raw, buffer, async)
    }
}

/// A `PGcancel *`. `@unchecked Sendable`: libpq documents `PQcancel` as safe to call from any thread (it only
/// reads the object); it is freed only after the last cancel request that uses it finished. Equal when they are
/// the same object.
struct PGCancelPointer: @unchecked Sendable, Equatable {
    let raw: OpaquePointer

    /// Sends a cancel request (`PQcancel`): a new connection to the server carrying the key. Blocks until the
    /// server answered: called on a blocking pool only. What became of it is not reported (the server answers
    /// nothing either way).
    func sendRequest() {
        var buffer = [CChar](repeating: 0, count: 256)
        _ = PQcancel(raw, &buffer, 256)
    }

    /// Frees the object: once no cancel request can use it any more.
    func free() { PQfreeCancel(raw) }
}
