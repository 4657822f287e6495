import CSystemShims

/// Thread names for ResourceKit's own threads (`rk.timers`, `rk.reactor`, `rk.blocking`), as `top` and `gdb`
/// show them.
package enum ThreadName {
    /// Names the calling thread (Linux keeps at most 15 bytes; longer names are cut).
    package static func setCurrent(_ name: String) {
        let cut = String(decoding: Array(name.utf8.prefix(15)), as: UTF8.self)
        _ = rk_set_thread_name(cut)
    }
}
