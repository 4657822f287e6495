import CSystemShims

enum ThreadName {
    /// Names the calling thread (Linux keeps at most 15 bytes; longer names are cut).
    static func setCurrent(_ name: String) {
        let cut = String(decoding: Array(name.utf8.prefix(15)), as: UTF8.self)
        _ = rk_set_thread_name(cut)
    }
}
