import Foundation

/// The process's open descriptors as `fd → target` (`socket:[123]`, `pipe:[45]`, a path), to find the
/// ones an adapter opened and check that its close released them. A descriptor counts as the same only if
/// both its number and its target match, so a number reused for something else is not mistaken for a leak.
struct DescriptorLedger: Sendable, Hashable {
    let entries: [Int32: String]

    static func now() -> DescriptorLedger {
        var entries: [Int32: String] = [:]
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        for name in names {
            guard let fd = Int32(name),
                  let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(name)") else { continue }
            entries[fd] = target
        }
        return DescriptorLedger(entries: entries)
    }

    /// Descriptors in `self` that were not in `earlier`.
    func opened(since earlier: DescriptorLedger) -> [Int32: String] {
        entries.filter { earlier.entries[$0.key] != $0.value }
    }

    /// Of `descriptors`, those still open with the same target.
    func stillOpen(_ descriptors: [Int32: String]) -> [Int32: String] {
        descriptors.filter { entries[$0.key] == $0.value }
    }
}
