import CSQLite
#if canImport(Glibc)
import Glibc
#endif
import ResourceKit
import ResourceKitIO
import Synchronization

/// The example's adapter with one seeded bug each, the mistakes an author of a blocking-library adapter makes:
/// the kit must catch every one, with the message that names the fix (`SeededSQLiteTests`).
final class SeededSQLiteDatabase: ManagedResource {
    enum Bug: String, Sendable, CaseIterable, CustomStringConvertible {
        /// `sqlite3_step` called from the async function: it holds a cooperative-pool thread.
        case stepOnCooperativePool
        /// The interrupt sent 1 ms later from a detached task, without asking whether the cancelled statement
        /// still runs (or ever ran): it lands on whatever statement runs then.
        case interruptFromDetachedTask
        /// `BlockingPool.run` with `sqlite3_interrupt` in `onCancel`: an interrupt that lands before
        /// `sqlite3_step` began is cleared by SQLite, and the wait ends before the statement did. Its long
        /// statements take 2 ms to start (`slowStart`), which keeps that window open wide enough for the kit's
        /// cancels to land in it.
        case interruptOnceBeforeTheStep
        /// No interrupt at all: the task returns, the statement runs on.
        case noInterrupt
        /// Every failure reported as `CancellationError`, a deadline included.
        case deadlineAsCancellation
        /// `close()` interrupts, hands `sqlite3_close_v2` to the connection's thread and returns without waiting
        /// for it (`submit` where `run` belongs): the database is still open, and a statement may still run, when
        /// the scope that closed it moves on. (Calling `sqlite3_close_v2` at once from the closing task instead
        /// cannot be seen: SQLite's connection mutex makes it wait for the running step, and SQLite defers the
        /// close until that statement is finalized.)
        case closeWithoutWaiting
        /// A hand-made bridge (a continuation around `BlockingPool.submit`, the interrupt in a task cancellation
        /// handler) and no check of cancellation first: in a cancelled task the handler runs before anything
        /// started, the interrupt finds nothing to stop, and the statement starts anyway.
        case noCheckpoint

        var description: String { rawValue }
    }

    static let kind = ResourceKind(name: "example.sqlite.seeded", closeTimeout: .seconds(5))

    // Used on `thread` only (and by the seeded bug that steps on the cooperative pool, one task at a time), except
    // by `sqlite3_interrupt`, which SQLite allows from any thread, under `state`'s lock while the handle is open.
    nonisolated(unsafe) private let db: OpaquePointer
    private let thread = BlockingPool.dedicatedThread(name: "sqlite.seeded")
    private let bug: Bug
    private let state = Locked(true)
    private let registration = HandleSlot()
    private let running = Atomic<Int>(0)

    private init(db: OpaquePointer, bug: Bug) {
        self.db = db
        self.bug = bug
    }

    static func open(_ path: String, bug: Bug, in scope: ResourceScope) async throws -> SeededSQLiteDatabase {
        var handle: OpaquePointer?
        guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil) == SQLITE_OK,
            let handle
        else { throw SeededFailure(code: SQLITE_CANTOPEN) }
        let database = SeededSQLiteDatabase(db: handle, bug: bug)
        try await database.registration.register(database, in: scope, kind: kind, label: "seeded sqlite")
        return database
    }

    var runningStatements: Int { running.load(ordering: .relaxed) }

    /// `slowStart`: the statement takes 2 ms to start, as a long statement's prepare may (the interrupt-once bug's
    /// window; the other variants ignore it).
    func query(_ sql: String, _ parameters: [String] = [], slowStart: Bool = false) async throws -> [String?] {
        let slowStart = slowStart && bug == .interruptOnceBeforeTheStep
        let handle = registration.handle
        if bug == .noCheckpoint {
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    let accepted = thread.submit { [self] in
                        continuation.resume(with: Result { try step(sql, parameters, nil, slowStart: slowStart) })
                    }
                    if !accepted { continuation.resume(throwing: SeededFailure(code: SQLITE_MISUSE)) }
                }
            } onCancel: {
                interrupt()
            }
        }
        try handle?.checkCancellation()
        try Task.checkCancellation()
        switch bug {
        case .stepOnCooperativePool:
            return try step(sql, parameters, nil, slowStart: slowStart)
        case .interruptFromDetachedTask:
            let onCancel: @Sendable (CancellationReason) -> Void = { [self] _ in
                // Owner: none, on purpose: this is the seeded bug.
                Task.detached {
                    try? await Task.sleep(for: .milliseconds(1))
                    self.interrupt()
                }
            }
            return try await thread.run(boundTo: handle, onCancel: onCancel) { [self] in
                try step(sql, parameters, nil, slowStart: slowStart)
            }
        case .interruptOnceBeforeTheStep:
            return try await thread.run(boundTo: handle, onCancel: { [self] _ in interrupt() }) { [self] in
                try step(sql, parameters, nil, slowStart: slowStart)
            }
        case .noInterrupt:
            return try await thread.run(boundTo: handle) { [self] in
                try step(sql, parameters, nil, slowStart: slowStart)
            }
        case .deadlineAsCancellation, .closeWithoutWaiting, .noCheckpoint:
            guard bug == .deadlineAsCancellation else {
                return try await thread.runInterruptible(boundTo: handle, interrupt: { [self] in interrupt() }) {
                    [self] interruption in try step(sql, parameters, interruption, slowStart: slowStart)
                }
            }
            do {
                return try await thread.runInterruptible(boundTo: handle, interrupt: { [self] in interrupt() }) {
                    [self] interruption in try step(sql, parameters, interruption, slowStart: slowStart)
                }
            } catch {
                throw CancellationError()
            }
        }
    }

    func cancel() {
        interrupt()
    }

    func close() async throws {
        defer { thread.shutdown() }
        interrupt()  // whatever the seeded bug, a closing connection stops its statement (no thread left spinning)
        if bug == .closeWithoutWaiting {
            _ = thread.submit { [self] in
                state.withLock { open in
                    guard open else { return }
                    open = false
                    sqlite3_close_v2(db)
                }
            }
            return
        }
        try await thread.run { [self] in
            state.withLock { open in
                guard open else { return }
                open = false
                sqlite3_close_v2(db)
            }
        }
    }

    private func interrupt() {
        state.withLock { open in
            if open { sqlite3_interrupt(db) }
        }
    }

    /// Steps `sql` to its end; returns the first column of the first row.
    private func step(
        _ sql: String, _ parameters: [String], _ interruption: BlockingCallInterruption?, slowStart: Bool
    ) throws -> [String?] {
        var prepared: OpaquePointer?
        let status = sqlite3_prepare_v2(db, sql, -1, &prepared, nil)
        guard status == SQLITE_OK, let statement = prepared else { throw SeededFailure(code: status) }
        defer { sqlite3_finalize(statement) }
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        for (index, value) in parameters.enumerated() {
            sqlite3_bind_text(statement, Int32(index + 1), value, -1, transient)
        }
        if slowStart {
            // The seeded bug's window held open, as a statement that takes 2 ms to prepare would: an interrupt that
            // lands before the first `sqlite3_step` is cleared by SQLite, so a cancel at the start of the call is
            // lost on almost every round, not only when it happens to fall between two lines.
            usleep(2_000)
        }
        if let interruption {
            sqlite3_progress_handler(
                db, 1_000,
                { Unmanaged<BlockingCallInterruption>.fromOpaque($0!).takeUnretainedValue().isRequested ? 1 : 0 },
                Unmanaged.passUnretained(interruption).toOpaque())
        }
        defer { sqlite3_progress_handler(db, 0, nil, nil) }
        running.add(1, ordering: .relaxed)
        defer { running.subtract(1, ordering: .relaxed) }
        var first: [String?] = []
        while true {
            switch sqlite3_step(statement) {
            case SQLITE_ROW where first.isEmpty:
                first = [sqlite3_column_text(statement, 0).map { String(cString: $0) }]
            case SQLITE_ROW:
                continue
            case SQLITE_DONE:
                return first
            case let failure:
                throw SeededFailure(code: failure)
            }
        }
    }
}

struct SeededFailure: Error {
    let code: Int32
}
