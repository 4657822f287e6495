import CSQLite
public import ResourceKit
import ResourceKitIO
import Synchronization

/// A SQLite database connection as a resource: an adapter for a blocking C library whose native cancel is
/// `sqlite3_interrupt`.
///
/// SQLite blocks, so every call on the connection runs on the connection's own thread (a one-thread
/// `BlockingPool` it owns and shuts down when it closes): the connection stays on one thread, and no call ever
/// occupies the cooperative pool.
///
/// Cancellation: a statement whose task, scope or deadline is cancelled while it runs is interrupted at once
/// (`sqlite3_interrupt`, and a progress handler that stops it even when the interrupt landed before SQLite
/// started), and `query` throws `CancellationError` or `DeadlineExceededError` once SQLite returned. A
/// statement cancelled before it started never runs. Cancelling the connection interrupts what runs on it.
public final class SQLiteDatabase: ManagedResource {
    public static let kind = ResourceKind(name: "example.sqlite", closeTimeout: .seconds(5))

    private struct State {
        var open = true
    }

    // Safe to share: used only on `thread`, except by `sqlite3_interrupt`, which SQLite allows from any thread
    // and which runs under `state`'s lock while the handle is open (`close()` closes it under that lock).
    nonisolated(unsafe) private let db: OpaquePointer
    private let thread: BlockingPool
    private let state = Locked(State())
    private let registration = HandleSlot()
    private let running = Atomic<Int>(0)

    private init(db: OpaquePointer, thread: BlockingPool) {
        self.db = db
        self.thread = thread
    }

    /// Opens (or creates) the database at `path` and registers the connection in `scope`.
    ///
    /// Cancellation: a cancel while the file is opened waits for the open to finish, then closes it; if
    /// `scope` is cancelled, the connection is closed at once and the call throws `CancellationError`.
    public static func open(_ path: String, in scope: ResourceScope) async throws -> SQLiteDatabase {
        let thread = BlockingPool.dedicatedThread(name: "sqlite")
        let opened: OpenedHandle
        do {
            opened = try await thread.runInterruptible(interrupt: {}) { _ in try OpenedHandle(openHandle(path)) }
        } catch {
            thread.shutdown()
            throw error
        }
        let database = SQLiteDatabase(db: opened.db, thread: thread)
        try await database.registration.register(database, in: scope, kind: kind, label: "sqlite database")
        return database
    }

    /// Statements running in SQLite now: what an external-work probe asks.
    public var runningStatements: Int { running.load(ordering: .relaxed) }

    // snippet: sqlite-query (quoted in Docs/WritingAnAdapter.md)
    /// Runs `sql` with `parameters` bound as text and returns every row, each column as text (`nil` for NULL).
    ///
    /// Cancellation: a checkpoint first (in a cancelled task or on a cancelled connection nothing runs); a
    /// cancel while it runs interrupts the statement and the call throws the cancel's error.
    public func query(_ sql: String, _ parameters: [String] = []) async throws -> [[String?]] {
        let handle = registration.handle
        try handle?.checkCancellation()
        try Task.checkCancellation()
        return try await thread.runInterruptible(boundTo: handle, interrupt: { [self] in interrupt() }) {
            [self] interruption in
            try step(sql, parameters, interruption)
        }
    }
    // end snippet

    /// Interrupts what runs on the connection. Non-blocking, idempotent, any thread.
    public func cancel() {
        interrupt()
    }

    /// Interrupts the statement running now (a scope can end while an unstructured task still queries), closes
    /// the connection on its thread after it, then lets the thread end.
    public func close() async throws {
        defer { thread.shutdown() }
        interrupt()
        try await thread.run { [self] in
            state.withLock { state in
                guard state.open else { return }
                state.open = false
                sqlite3_close_v2(db)
            }
        }
    }

    private func interrupt() {
        state.withLock { state in
            if state.open { sqlite3_interrupt(db) }
        }
    }

    private static func openHandle(_ path: String) throws -> OpaquePointer {
        var db: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let status = sqlite3_open_v2(path, &db, flags, nil)
        guard status == SQLITE_OK, let db else {
            if let db { sqlite3_close_v2(db) }
            throw SQLiteError(status)
        }
        return db
    }

    /// On the connection's thread: prepares, binds and steps `sql` to its end. Leaves nothing running when it
    /// returns (the statement is finalized), so an interrupt in the moment after SQLite returned finds nothing.
    private func step(_ sql: String, _ parameters: [String], _ interruption: BlockingCallInterruption) throws
        -> [[String?]]
    {
        guard state.withLock({ $0.open }) else { throw SQLiteError(SQLITE_MISUSE) }
        var prepared: OpaquePointer?
        let status = sqlite3_prepare_v2(db, sql, -1, &prepared, nil)
        guard status == SQLITE_OK, let statement = prepared else { throw SQLiteError(status) }
        defer { sqlite3_finalize(statement) }
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        for (index, value) in parameters.enumerated() {
            sqlite3_bind_text(statement, Int32(index + 1), value, -1, transient)
        }
        // Every 1,000 virtual-machine steps SQLite asks whether to stop: a cancel that landed before
        // `sqlite3_step` began (which clears a pending `sqlite3_interrupt`) still stops the statement.
        let context = Unmanaged.passUnretained(interruption).toOpaque()
        sqlite3_progress_handler(
            db, 1_000,
            { context in
                Unmanaged<BlockingCallInterruption>.fromOpaque(context!).takeUnretainedValue().isRequested ? 1 : 0
            }, context)
        defer { sqlite3_progress_handler(db, 0, nil, nil) }
        running.add(1, ordering: .relaxed)
        defer { running.subtract(1, ordering: .relaxed) }
        var rows: [[String?]] = []
        while true {
            switch sqlite3_step(statement) {
            case SQLITE_ROW:
                rows.append(
                    (0..<sqlite3_column_count(statement)).map { column in
                        sqlite3_column_text(statement, column).map { String(cString: $0) }
                    })
            case SQLITE_DONE:
                return rows
            case let failure:
                throw SQLiteError(failure)
            }
        }
    }
}

/// A freshly opened `sqlite3*` on its way from the connection's thread to the connection.
// Unchecked: the pointer is handed over once (the opening call returns it) and is then used by the connection
// only, under the rules written at `SQLiteDatabase.db`.
private struct OpenedHandle: @unchecked Sendable {
    let db: OpaquePointer

    init(_ db: OpaquePointer) {
        self.db = db
    }
}

/// A SQLite result code. Its description names the code only: SQLite's messages can quote the statement.
public struct SQLiteError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The primary result code (`SQLITE_INTERRUPT`, `SQLITE_BUSY`, ...).
    public let code: Int32

    init(_ code: Int32) {
        self.code = code
    }

    public var description: String { "SQLiteError(\(String(cString: sqlite3_errstr(code))))" }
}
