import ResourceKit
import Synchronization

/// A task waiting on a pool (a queued lease, or a shared statement), as its task's, borrowing scope's and enclosing
/// operation's cancellation see it: it joins those levels (`CancellationLinks.joinCallersLevels`) and hands a
/// cancel to the pool, which decides under its lock. Its state lives in the pool's machines, under their locks;
/// `asked` is only read and written under the lock of the machine it waits in (an atomic only so that the class
/// is `Sendable` without an unchecked promise). Numbered before the task's cancellation handler is installed, so
/// that a cancel arriving before it asked can name it.
final class PoolWaiter: CancellableOperation {
    enum Kind {
        /// A lease queued for a connection (``PoolStateMachine``).
        case lease
        /// A shared statement (``SharedStatementMachine``).
        case statement
    }

    let pool: PostgresPool
    let id: UInt64
    let kind: Kind
    /// It has asked its machine (queued, or submitted): a cancel looks there.
    let asked = Atomic<Bool>(false)

    init(pool: PostgresPool, id: UInt64, kind: Kind) {
        self.pool = pool
        self.id = id
        self.kind = kind
    }

    func cancel(_ reason: CancellationReason) {
        switch kind {
        case .lease: pool.cancelLease(self, reason)
        case .statement: pool.cancelStatement(self, reason)
        }
    }
}
