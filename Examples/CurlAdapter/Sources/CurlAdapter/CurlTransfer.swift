import CCurl
import Glibc
import ResourceKitIO

/// One request on a libcurl multi handle of its own, driven turn by turn by the task that waits for it: libcurl
/// says through its callbacks which descriptors it wants to hear about and when its timer fires; the task waits
/// for that with `IOReactor.waitForAny` and hands back what woke it (`drive`). Every socket libcurl opens goes
/// through `sockets` (its open and close hooks), so a cancel can shut them down and no wait ever lands on a number
/// libcurl gave back.
///
/// Not `Sendable`: one task drives it, as libcurl wants a handle used by one thread at a time.
final class CurlTransfer {
    let sockets: LibraryDescriptors
    private let easy: UnsafeMutableRawPointer
    private let multi: UnsafeMutableRawPointer
    /// What libcurl wants to hear about now: `CURL_POLL_IN`, `_OUT` or `_INOUT` per descriptor.
    private var wanted: [Int32: Int32] = [:]
    /// When libcurl's timer fires (`nil`: it set none).
    private(set) var timer: ContinuousClock.Instant?
    private var body: [UInt8] = []
    private var finished = false

    private static let globalInit: Void = { _ = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()

    /// A transfer of `url`, not started: the first ``drive(_:)`` starts it. `timeout` is libcurl's own limit on
    /// the whole transfer (`CURLOPT_TIMEOUT_MS`, which its timer enforces); the adapter leaves it unset: deadlines
    /// are the caller's scope's.
    init(url: String, sockets: LibraryDescriptors, timeout: Duration? = nil) throws(CurlError) {
        Self.globalInit
        guard let easy = curl_easy_init() else { throw CurlError(CURLE_OUT_OF_MEMORY) }
        guard let multi = curl_multi_init() else {
            curl_easy_cleanup(easy)
            throw CurlError(CURLE_OUT_OF_MEMORY)
        }
        self.easy = easy
        self.multi = multi
        self.sockets = sockets
        let me = Unmanaged.passUnretained(self).toOpaque()
        let library = Unmanaged.passUnretained(sockets).toOpaque()
        let results = [
            rk_curl_easy_set_string(easy, CURLOPT_URL, url),
            rk_curl_easy_set_long(easy, CURLOPT_NOSIGNAL, 1),
            rk_curl_easy_set_write(easy, Self.received),
            rk_curl_easy_set_pointer(easy, CURLOPT_WRITEDATA, me),
            rk_curl_easy_set_open_socket(easy, Self.openSocket),
            rk_curl_easy_set_pointer(easy, CURLOPT_OPENSOCKETDATA, library),
            rk_curl_easy_set_close_socket(easy, Self.closeSocket),
            rk_curl_easy_set_pointer(easy, CURLOPT_CLOSESOCKETDATA, library),
            rk_curl_easy_set_long(easy, CURLOPT_TIMEOUT_MS, timeout.map { Int($0 / .milliseconds(1)) } ?? 0),
        ]
        let multiResults = [
            rk_curl_multi_set_socket(multi, Self.socketWanted, me),
            rk_curl_multi_set_timer(multi, Self.timerWanted, me),
            curl_multi_add_handle(multi, easy),
        ]
        if let failed = results.first(where: { $0 != CURLE_OK }) {
            finish()
            throw CurlError(failed)
        }
        if let failed = multiResults.first(where: { $0 != CURLM_OK }) {
            finish()
            throw CurlError(multi: failed)
        }
    }

    deinit { finish() }

    /// What libcurl wants to hear about in the next turn of its loop.
    var interests: [LoopInterest] {
        wanted.flatMap { fd, what in
            (what & CURL_POLL_IN != 0 ? [LoopInterest(fd, .readable)] : [])
                + (what & CURL_POLL_OUT != 0 ? [LoopInterest(fd, .writable)] : [])
        }
    }

    /// One turn: hands libcurl what woke the loop (`nil`: start the transfer) and returns the response once the
    /// transfer is done, `nil` while it goes on.
    /// - Throws: ``CurlError`` when the transfer failed.
    func drive(_ wake: LoopWake?) throws(CurlError) -> CurlResponse? {
        var running: Int32 = 0
        let result: CURLMcode
        switch wake {
        case .ready(let fd, let events):
            var mask: Int32 = 0
            if events.contains(.readable) { mask |= CURL_CSELECT_IN }
            if events.contains(.writable) { mask |= CURL_CSELECT_OUT }
            if events.contains(.error) { mask |= CURL_CSELECT_ERR }
            result = curl_multi_socket_action(multi, fd, mask, &running)
        case .timer, nil:
            timer = nil  // one-shot: libcurl sets the next one through its callback
            result = curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running)
        }
        guard result == CURLM_OK else { throw CurlError(multi: result) }
        var queued: Int32 = 0
        while let message = curl_multi_info_read(multi, &queued) {
            guard message.pointee.msg == CURLMSG_DONE else { continue }
            let code = message.pointee.data.result
            guard code == CURLE_OK else { throw CurlError(code) }
            return CurlResponse(status: rk_curl_easy_response_code(easy), body: body)
        }
        return nil
    }

    /// Ends the transfer, done or not: libcurl closes its sockets (through the close hook, so they leave
    /// `sockets`) before this returns. Idempotent.
    func finish() {
        guard !finished else { return }
        finished = true
        curl_multi_remove_handle(multi, easy)
        curl_easy_cleanup(easy)
        curl_multi_cleanup(multi)
    }

    // libcurl's callbacks: plain C functions, their context in the pointer libcurl hands back.

    private static let received: curl_write_callback = { data, size, count, context in
        let transfer = Unmanaged<CurlTransfer>.fromOpaque(context!).takeUnretainedValue()
        transfer.body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: size * count))
        return size * count
    }

    private static let socketWanted: curl_socket_callback = { _, fd, what, context, _ in
        let transfer = Unmanaged<CurlTransfer>.fromOpaque(context!).takeUnretainedValue()
        transfer.wanted[fd] = what == CURL_POLL_REMOVE ? nil : what
        return 0
    }

    private static let timerWanted: curl_multi_timer_callback = { _, milliseconds, context in
        let transfer = Unmanaged<CurlTransfer>.fromOpaque(context!).takeUnretainedValue()
        transfer.timer = milliseconds < 0 ? nil : .now + .milliseconds(milliseconds)
        return 0
    }

    /// libcurl opens a socket: the set learns it before libcurl uses it.
    private static let openSocket: curl_opensocket_callback = { context, _, address in
        guard let address else { return CURL_SOCKET_BAD }
        let fd = socket(
            address.pointee.family, address.pointee.socktype | Int32(SOCK_CLOEXEC.rawValue),
            address.pointee.protocol)
        if fd >= 0 { Unmanaged<LibraryDescriptors>.fromOpaque(context!).takeUnretainedValue().insert(fd) }
        return fd
    }

    /// libcurl closes a socket: it leaves the set (its waits fail, a later shutdown skips it), then closes.
    private static let closeSocket: curl_closesocket_callback = { context, fd in
        Unmanaged<LibraryDescriptors>.fromOpaque(context!).takeUnretainedValue().close(fd) ? 0 : 1
    }
}
