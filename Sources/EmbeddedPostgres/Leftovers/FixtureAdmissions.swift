import ResourceKit

/// The making of what a sweep removes (a marked directory, a marked process), against the cleanup a termination
/// signal runs (Docs/Architecture.md, "Nothing outlives its owner"). Tests keep running while that cleanup stops
/// their servers, and a test that then fails over to its next case would make a new directory or start a new
/// helper after the sweep had looked: the process then died with it left behind. So the cleanup first closes the
/// admissions: a making that began before finishes before ``close()`` returns (the sweep sees what it made), and
/// none begins after.
public final class FixtureAdmissions: Sendable {
    /// Why a fixture was not made.
    public struct Closed: Error, Sendable, CustomStringConvertible {
        public var description: String { "the process is ending (a termination signal arrived): no new fixture" }
    }

    private struct State {
        var closed = false
        /// Makings admitted and not finished.
        var making = 0
    }

    /// Only counted under the lock: a making (a system call that may block) runs after it, and ``close()`` waits on
    /// the lock's condition for the count to reach zero, on the signal handler's dispatch thread, never the
    /// cooperative pool.
    private let state = Locked(State(), withCondition: true)

    public init() {}

    /// The process's own, closed by ``Leftovers/onTerminationSignal(_:)`` before any cleanup runs.
    public static let process = FixtureAdmissions()

    /// Runs `make` unless the admissions are closed; a ``close()`` that begins meanwhile returns after it. Keep it
    /// short (a directory made, a process spawned), never a wait for a process to finish.
    ///
    /// - Throws: ``Closed`` (and `make` does not run) once ``close()`` began; whatever `make` throws.
    public func admit<Made, Failure: Error>(_ make: () throws(Failure) -> Made) throws -> Made {
        try state.withLock { state in
            guard !state.closed else { throw Closed() }
            state.making += 1
        }
        defer {
            state.withLockSignalling { state in
                state.making -= 1
                return ((), state.closed && state.making == 0)
            }
        }
        return try make()
    }

    /// Whether a making would be admitted now (for a long command that spawns through others: checked before it
    /// starts; a sweep that begins while it runs stops it, since it is marked).
    public var isOpen: Bool { !state.withLock { $0.closed } }

    /// No making is admitted from now on; returns once every making in progress has finished. Blocks the calling
    /// thread meanwhile: not for the cooperative pool.
    public func close() {
        state.withLock { $0.closed = true }
        state.waitWithLock { $0.making == 0 ? () : nil }
    }
}
