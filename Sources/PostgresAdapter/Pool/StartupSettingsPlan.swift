/// Where a pool's connections ask for their vanished-client check (``PostgresSessionOptions/clientCheckInterval``)
/// (Docs/Architecture.md, "Clean sessions"). Asked after connect, the setting is one that `DISCARD ALL` takes back,
/// so the pool's session reset must apply it again, and the reset then needs a sync of its own before the next
/// user's statement. Asked in the startup packet (`options=-c client_connection_check_interval=...`), it is the
/// session's own default, which `DISCARD ALL` keeps: the reset has nothing to restore and can share the
/// statement's sync. A server before PostgreSQL 14 refuses an unknown setting there, and PgBouncer refuses
/// `options` unless told to ignore it, both by failing the connection: the pool then opens again at once, asking
/// after connect, and keeps to that for good (one refused attempt per pool, reported as
/// `postgres.pool.startupSettingRefused`).
///
/// A value: the pool's machine holds it (``PoolStateMachine/startupPlan``), under the pool's one lock.
enum StartupSettingsPlan: Sendable, Equatable {
    /// Ask in the startup packet (where a pool starts).
    case inStartupPacket
    /// A connection asked in the startup packet was refused for it: ask after connect.
    case afterConnect

    /// Whether the next open asks in the startup packet.
    var asksInStartupPacket: Bool { self == .inStartupPacket }

    /// An open that asked in the startup packet failed with `message`. Returns whether to open again at once,
    /// asking after connect: when the message says the server or a pooler refused the setting (an unknown
    /// setting, or `options` itself).
    mutating func startupPacketFailed(_ message: String) -> Bool {
        guard Self.refusesSetting(message) else { return false }
        self = .afterConnect
        return true
    }

    /// Whether a failed open's message says the server or a pooler refused the startup packet's setting.
    static func refusesSetting(_ message: String) -> Bool {
        message.contains("client_connection_check_interval") || message.contains("unsupported startup parameter")
    }
}
