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

    private let closed = Locked(false)

    public init() {}

    /// The process's own, closed by ``Leftovers/onTerminationSignal(_:)`` before any cleanup runs.
    public static let process = FixtureAdmissions()

    /// Runs `make` unless the admissions are closed, holding them open until it returns: keep it short (a
    /// directory made, a process spawned), never a wait for a process to finish.
    ///
    /// - Throws: ``Closed`` (and `make` does not run) once ``close()`` began; whatever `make` throws.
    public func admit<Made, Failure: Error>(_ make: () throws(Failure) -> Made) throws -> Made {
        try closed.withLock { closed -> Made in
            guard !closed else { throw Closed() }
            return try make()
        }
    }

    /// Whether a making would be admitted now (for a long command that spawns through others: checked before it
    /// starts; a sweep that begins while it runs stops it, since it is marked).
    public var isOpen: Bool { !closed.withLock { $0 } }

    /// No making is admitted from now on; returns once any making in progress has finished.
    public func close() {
        closed.withLock { $0 = true }
    }
}
