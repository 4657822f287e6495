/// ``ServerStop``'s decisions as a value, held under its lock and acted on after it (Docs/Architecture.md,
/// "Stopping work on a server"): which operation a stop belongs to, whether its re-sends go on, whether the
/// operation's end releases the connection, drains it first or leaves it broken. Tested without I/O
/// (`ServerStopStateMachineTests`).
///
/// An operation is numbered when it begins; every later event names it, so an event of an operation that ended
/// (a re-send tick, a late cancel) cannot touch the next one.
struct ServerStopStateMachine: Sendable {
    typealias Operation = UInt64

    enum State: Sendable, Equatable {
        /// No operation holds the connection.
        case idle
        /// `operation` runs; `stopRequested` once its cancel asked the server to stop it.
        case running(operation: Operation, stopRequested: Bool)
        /// `operation` ended after its stop was requested: its reply is read (the drain) and its stop's re-sends
        /// end before the connection is released.
        case settling(operation: Operation)
        /// A drain failed or gave up: what the server still does for the connection is unknown. Nothing begins.
        case broken
        /// The owner closed: nothing begins.
        case closed
    }

    private(set) var state = State.idle
    private var lastOperation: Operation = 0

    enum BeginError: Error, Equatable {
        case broken
        case closed
    }

    /// An operation begins (its caller holds the connection's lease).
    mutating func begin() -> Result<Operation, BeginError> {
        switch state {
        case .broken: return .failure(.broken)
        case .closed: return .failure(.closed)
        case .idle, .running, .settling:
            // The lease makes `running` and `settling` impossible here; a new operation replaces them regardless.
            lastOperation += 1
            state = .running(operation: lastOperation, stopRequested: false)
            return .success(lastOperation)
        }
    }

    /// `operation`'s cancel arrived. Returns `true` exactly once per operation, while it runs: start the stop's
    /// sends then.
    mutating func cancelRequested(_ operation: Operation) -> Bool {
        guard case .running(operation, stopRequested: false) = state else { return false }
        state = .running(operation: operation, stopRequested: true)
        return true
    }

    enum EndAction: Sendable, Equatable {
        /// No stop was requested: release the connection.
        case release
        /// A stop was requested and the operation threw: drain its reply, end the re-sends, then ``settled(_:clean:)``.
        case drain
        /// A stop was requested but the operation read its reply: end the re-sends, then ``settled(_:clean:)``.
        case settle
    }

    /// `operation` returned (`threw`: with an error).
    mutating func ended(_ operation: Operation, threw: Bool) -> EndAction {
        guard case .running(operation, let stopRequested) = state else { return .release }
        guard stopRequested else {
            state = .idle
            return .release
        }
        state = .settling(operation: operation)
        return threw ? .drain : .settle
    }

    /// Whether the stop of `operation` is still owed (another send is due).
    func stopOwed(_ operation: Operation) -> Bool {
        switch state {
        case .running(operation, stopRequested: true), .settling(operation): true
        default: false
        }
    }

    /// `operation`'s drain ended and its stop's sends with it: `clean` if the reply was read.
    mutating func settled(_ operation: Operation, clean: Bool) {
        guard case .settling(operation) = state else { return }
        state = clean ? .idle : .broken
    }

    /// The owner closes.
    mutating func close() {
        state = .closed
    }
}
