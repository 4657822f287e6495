import ResourceKit

extension PostgresConnection {
    /// Runs one parameterised statement (`$1`, `$2`, ...) and returns its result.
    ///
    /// Cancellation: see ``PostgresConnection``. Already-cancelled task: nothing is sent.
    /// - Throws: `CancellationError`, `DeadlineExceededError`, ``PostgresError`` (`server` with SQLSTATE,
    ///   `connection`, `connectionBusy` when another operation runs on this connection).
    @discardableResult
    public func execute(_ sql: String, _ binds: [any PostgresEncodable] = []) async throws -> PostgresResult {
        try await run(sql, binds.map(\.postgresBind)) ?? PostgresResult(rows: [], commandTag: "", affectedRows: nil)
    }

    /// Runs a query and returns its rows. Cancellation as ``execute(_:_:)``.
    public func query(_ sql: String, _ binds: [any PostgresEncodable] = []) async throws -> [PostgresRow] {
        try await execute(sql, binds).rows
    }

    /// Runs `body` in a transaction: committed when `body` returns, rolled back when it throws.
    ///
    /// Cancellation: when the task is cancelled the caller gets `CancellationError` at once; the interrupted
    /// transaction is rolled back before the connection's next operation (or ends with the connection), so a
    /// connection is never reused inside a half-done transaction.
    @discardableResult
    public func withTransaction<T>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await execute("BEGIN")
        let value: T
        do {
            value = try await body(self)
        } catch {
            if error.isResourceCancellation || Task.isCancelled {
                state.withLock { $0.machine.requireRollback() }
            } else {
                do { try await execute("ROLLBACK") } catch { state.withLock { $0.machine.requireRollback() } }
            }
            throw error
        }
        do {
            try await execute("COMMIT")
        } catch {
            if error.isResourceCancellation { state.withLock { $0.machine.requireRollback() } }
            throw error
        }
        return value
    }

    /// ``execute(_:_:)``'s work: the last result of `sql`, `nil` when it had none.
    func run(_ sql: String, _ binds: [PostgresBind]) async throws -> PostgresResult? {
        try await countingOperation { try await runUncounted(sql, binds) }
    }

    /// A statement the adapter runs for itself (a session setting at connect, the identity probe, a cancel on
    /// the control connection): as ``execute(_:_:)``, and not counted in `resourcekit_operations_total`, which
    /// counts what callers asked for.
    @discardableResult
    func executeInternally(_ sql: String, _ binds: [any PostgresEncodable] = []) async throws -> PostgresResult {
        try await runUncounted(sql, binds.map(\.postgresBind))
            ?? PostgresResult(rows: [], commandTag: "", affectedRows: nil)
    }

    private func runUncounted(_ sql: String, _ binds: [PostgresBind]) async throws -> PostgresResult? {
        try Task.checkCancellation()
        try checkHandleBeforeBegin()
        try await begin(carryingReset: true)
        defer { end() }
        try Task.checkCancellation()
        try handle?.checkCancellation()
        return try await sendAndCollect(sql, binds, carryingReset: true)
    }
}
