import CSystemShims
import Foundation

/// ResourceKit's one way to make a thread of its own (Docs/Architecture.md, "Threads and pools"): named, as
/// `top` and `gdb` show it (`rk.timers`, `rk.reactor`, `rk.blocking.0`, `rk.spawner`), and never the cooperative
/// pool's. For the few loops that must block: a timer wait, `epoll_wait`, a blocking call, a fork.
package enum DedicatedThread {
    /// Starts `body` on a new thread named `name` (Linux keeps at most 15 bytes; longer names are cut). The
    /// thread ends when `body` returns.
    package static func start(name: String, _ body: @escaping @Sendable () -> Void) {
        let cut = String(decoding: Array(name.utf8.prefix(15)), as: UTF8.self)
        let thread = Thread {
            _ = rk_set_thread_name(cut)
            body()
        }
        thread.start()
    }
}
