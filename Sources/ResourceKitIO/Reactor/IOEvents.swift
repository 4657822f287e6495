import CSystemShims
import ResourceKit

/// Which readiness a waiter asks for.
public enum IOInterest: Sendable, Hashable {
    /// Data (or end of stream, or an error) can be read without blocking.
    case readable
    /// Data can be written without blocking (or the peer is gone).
    case writable
}

/// What the kernel reported when a wait resumed. Readiness may be spurious (another reader may have drained
/// the data first): adapters retry their non-blocking call and wait again on `EAGAIN`.
public struct IOEvents: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let readable = IOEvents(rawValue: 1 << 0)
    public static let writable = IOEvents(rawValue: 1 << 1)
    /// An error is pending on the descriptor.
    public static let error = IOEvents(rawValue: 1 << 3)

    /// Translates epoll bits.
    init(epoll bits: UInt32) {
        var events: IOEvents = []
        if bits & rk_EPOLLIN != 0 { events.insert(.readable) }
        if bits & rk_EPOLLOUT != 0 { events.insert(.writable) }
        if bits & rk_EPOLLERR != 0 { events.insert(.error) }
        self = events
    }
}
