/// Something that holds descriptor numbers and can keep one held while a reactor wait registers on it: a
/// ``GuardedDescriptor`` (which owns and closes its descriptor) or a ``LibraryDescriptors`` set (descriptors a C
/// library opens and closes). A number it no longer holds may already belong to a stranger (the kernel hands out
/// the lowest free number), so nothing may be registered on it (Docs/Architecture.md, "Descriptors that close
/// under a wait"); ``IOReactor/wait(for:_:heldBy:boundTo:deadline:)`` registers through it.
public protocol DescriptorHolder: Sendable {
    /// Runs `body` while `fd` is still held, under the lock that releasing it also takes; `false`, having run
    /// nothing, when it is not held. `body` must not block.
    func whileHeld(_ fd: Int32, _ body: () -> Void) -> Bool
}
