import CLibPQ
import ResourceKit

/// The wire-level steps every operation shares: acquire, clean up after a cancelled predecessor, send,
/// flush, collect. Decisions are taken under `state`'s lock (which also serialises libpq); waits happen
/// outside it.
extension PostgresConnection {
    enum Step {
        case wait(Int32)
        case done(ourCancel: Bool)
    }

    func begin() throws {
        try state.withLock { state in
            if state.conn == nil || state.broken {
                throw PostgresError(.connection, "the connection is closed or broken")
            }
            if state.busy {
                throw PostgresError(.connectionBusy, "another operation is running on this connection")
            }
            state.busy = true
        }
    }

    func end() {
        state.withLock { $0.busy = false }
    }

    func markBroken() {
        state.withLock { $0.broken = true }
    }

    /// Before a new query: wait for a pending cancel request, drain a cancelled query to ReadyForQuery, roll
    /// back an interrupted transaction. Bounded by `cancelTimeout`; past it the connection is broken.
    func prepare() async throws {
        let deadline = ContinuousClock.now + cancelTimeout
        do {
            if let pending = state.withLock({ $0.cancelDone }) {
                try await pending.wait(deadline: deadline)
                state.withLock { if $0.cancelDone === pending { $0.cancelDone = nil } }
            }
            if state.withLock({ $0.needsDrain }) {
                try await drain(deadline: deadline)
            }
        } catch is DeadlineExceededError {
            markBroken()
            throw PostgresError(.connection, "a cancelled query did not finish in time; the connection was discarded")
        }
        if state.withLock({ $0.needsRollback }) {
            state.withLock { $0.needsRollback = false }
            _ = try await sendAndCollect("ROLLBACK", [])
        }
    }

    /// Reads and discards results until ReadyForQuery.
    func drain(deadline: ContinuousClock.Instant) async throws {
        while true {
            let step = try state.withLock { state -> Step in
                let conn = try Self.usable(&state)
                while PQisBusy(conn) == 0 {
                    guard let result = PQgetResult(conn) else {
                        state.needsDrain = false
                        state.inFlight = nil
                        return .done(ourCancel: false)
                    }
                    PQclear(result)
                }
                return .wait(state.socket)
            }
            guard case .wait(let socket) = step else { return }
            try await reactor.wait(for: socket, .readable, deadline: deadline)
        }
    }

    /// Consumes input and returns the connection, or marks it broken and throws.
    static func usable(_ state: inout State) throws -> OpaquePointer {
        guard let conn = state.conn?.raw else { throw PostgresError(.connection, "the connection was closed") }
        if PQconsumeInput(conn) == 0 {
            state.broken = true
            state.inFlight = nil
            let message = String(cString: PQerrorMessage(conn)).trimmingCharacters(in: .whitespacesAndNewlines)
            throw PostgresError(.connection, message.isEmpty ? "the connection was lost" : message)
        }
        return conn
    }

    /// Sends one parameterised statement and returns its query id.
    func send(_ sql: String, _ binds: [PostgresBind], singleRow: Bool) throws -> UInt64 {
        try state.withLock { state in
            guard let conn = state.conn?.raw, !state.broken else {
                throw PostgresError(.connection, "the connection is closed or broken")
            }
            let types = binds.map { Oid($0.oid) }
            let values = binds.map(\.text)
            let sent = values.withOptionalCStrings { values in
                types.withUnsafeBufferPointer { types in
                    PQsendQueryParams(conn, sql, Int32(binds.count), types.baseAddress, values, nil, nil, 0)
                }
            }
            guard sent == 1 else {
                let message = String(cString: PQerrorMessage(conn)).trimmingCharacters(in: .whitespacesAndNewlines)
                if PQstatus(conn) == CONNECTION_BAD { state.broken = true }
                throw PostgresError(PQstatus(conn) == CONNECTION_BAD ? .connection : .invalidQuery, message)
            }
            if singleRow { PQsetSingleRowMode(conn) }
            state.nextQueryID += 1
            state.inFlight = state.nextQueryID
            state.cancelRequested = nil
            return state.nextQueryID
        }
    }

    /// Flushes the send buffer, waiting for writability.
    func flush(handle: ResourceHandle?) async throws {
        while true {
            let (pending, socket) = try state.withLock { state -> (Int32, Int32) in
                guard let conn = state.conn?.raw else { throw PostgresError(.connection, "the connection was closed") }
                return (PQflush(conn), state.socket)
            }
            if pending == 0 { return }
            if pending < 0 {
                markBroken()
                throw PostgresError(.connection, "could not send the query")
            }
            try await reactor.wait(for: socket, .writable, boundTo: handle)
        }
    }

    /// Sends `sql` and collects every result until ReadyForQuery; the cancel request goes out from inside
    /// `withTaskCancellationHandler`.
    func sendAndCollect(_ sql: String, _ binds: [PostgresBind]) async throws -> [PostgresResult] {
        let handle = self.handle
        let id = try send(sql, binds, singleRow: false)
        do {
            return try await withTaskCancellationHandler {
                try await flush(handle: handle)
                return try await collect(id, handle: handle)
            } onCancel: {
                self.requestCancel(id)
            }
        } catch {
            if error.isResourceCancellation {
                state.withLock { if $0.inFlight == id { $0.needsDrain = true } }
            }
            throw error
        }
    }

    private func collect(_ id: UInt64, handle: ResourceHandle?) async throws -> [PostgresResult] {
        var spunOnce = false
        var results: [PostgresResult] = []
        var failure: PostgresError?
        while true {
            let step = try state.withLock { state -> Step in
                let conn = try Self.usable(&state)
                while PQisBusy(conn) == 0 {
                    guard let result = PQgetResult(conn) else {
                        state.inFlight = nil
                        return .done(ourCancel: state.cancelRequested == id)
                    }
                    defer { PQclear(result) }
                    switch PQresultStatus(result) {
                    case PGRES_TUPLES_OK, PGRES_COMMAND_OK, PGRES_SINGLE_TUPLE, PGRES_EMPTY_QUERY:
                        results.append(.from(result))
                    case PGRES_FATAL_ERROR:
                        failure = failure ?? .server(result)
                    default:
                        // COPY and friends are not offered: the state is unknown, so the connection goes.
                        state.broken = true
                        failure = PostgresError(.invalidQuery, "COPY is not supported by this adapter")
                    }
                }
                return .wait(state.socket)
            }
            switch step {
            case .wait(let socket):
                // A local server usually answers within a few tens of microseconds: look again for a short,
                // bounded while before parking on the reactor (which costs two thread wake-ups).
                if !spunOnce, Self.becomesReadable(socket, within: Self.answerSpin, unless: { Task.isCancelled || handle?.isCancelled == true }) {
                    spunOnce = true
                    continue
                }
                spunOnce = true
                try await reactor.wait(for: socket, .readable, boundTo: handle)
            case .done(let ourCancel):
                if let failure {
                    // 57014 that we caused is our cancellation, not a failure.
                    if failure.isQueryCanceled && ourCancel { throw CancellationError() }
                    throw failure
                }
                return results
            }
        }
    }
}

extension PostgresConnection {
    /// How long a query's first wait for its answer polls the socket before parking on the reactor. A local
    /// server answers a short query in about 50-100 µs here; parking costs two thread wake-ups (reactor, then
    /// a cooperative thread), which made round trips 0.70x of blocking libpq's. With the look-again, they are
    /// faster than blocking libpq's (`resource-demo bench`, "round trip").
    static let answerSpin: Duration = .microseconds(100)

    /// Polls `socket` without blocking (yielding the CPU between looks) until it is readable, `limit` passed,
    /// or `stop()` holds (a cancellation: the caller then parks and is resumed at once). Never blocks: each
    /// look is `poll` with a zero timeout.
    static func becomesReadable(_ socket: Int32, within limit: Duration, unless stop: () -> Bool) -> Bool {
        let deadline = ContinuousClock.now + limit
        var entry = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        repeat {
            if poll(&entry, 1, 0) > 0 { return true }
            if stop() { return false }
            sched_yield()
        } while ContinuousClock.now < deadline
        return false
    }
}

extension Array where Element == String? {
    func withOptionalCStrings<R>(_ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> R) -> R {
        let duplicated = map { $0.map { strdup($0) } ?? nil }
        defer { duplicated.forEach { free($0) } }
        return duplicated.map { UnsafePointer($0) }.withUnsafeBufferPointer { body($0.baseAddress) }
    }
}

#if canImport(Glibc)
import Glibc
#endif
import Foundation
