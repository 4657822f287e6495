import Foundation
import Glibc
import ResourceKit
import Synchronization

extension AdapterConformance {
    /// The levels of cancellation above the resource reach the operation's waits, in the one hook order
    /// (Docs/Architecture.md, "The cancel tree"): the operation runs inside a `withResourceOperation` of the kit's,
    /// in a scope of the kit's that borrows the resource; the kit cancels that scope. The operation must return
    /// with `CancellationError`, and not before the enclosing operation's `onCancel` has run. It holds when the
    /// adapter's waits are ResourceKit waits (a `CancellationCell`, `IOReactor.wait`, `BlockingPool`), which join
    /// the caller's operation and scope; a wait on a continuation of the adapter's own is reached by its task and
    /// its resource only.
    ///
    /// (The task itself is not the source here: Swift lets a cancelled task go on only once all of its cancellation
    /// handlers returned, so a task cancel cannot show the order.)
    func hooksRunBeforeTheReturn() async -> ConformanceReport.Check {
        await withFreshResource("hooks run before the return") { scope, resource, _, problems, measurements in
            let hookFinished = Atomic<Bool>(false)
            let sawHook = Atomic<Bool>(false)
            let borrower = Mutex<ResourceScope?>(nil)
            let operation = self.operation
            // Owner: this check, which cancels its scope and awaits it below (bounded).
            let task = Task<Void, any Error> {
                defer { sawHook.store(hookFinished.load(ordering: .acquiring), ordering: .relaxed) }
                try await withResourceScope("conformance.borrower") { inner in
                    borrower.withLock { $0 = inner }
                    try await withResourceOperation(
                        boundTo: nil,
                        onCancel: { _ in
                            // Long enough that a return which does not wait for it is seen.
                            usleep(20_000)
                            hookFinished.store(true, ordering: .releasing)
                        }
                    ) { try await operation(resource) }
                }
            }
            await Self.parked(scope, within: bounds.settle)
            // From a thread of its own: the cancel runs the kit's 20 ms hook there, not on the cooperative pool.
            let borrowing = borrower.withLock { $0 }
            await withCheckedContinuation { (cancelled: CheckedContinuation<Void, Never>) in
                Thread {
                    borrowing?.cancel()
                    cancelled.resume()
                }.start()
            }
            let (ended, _) = await Self.wait(for: task, upTo: bounds.hang)
            guard let ended else {
                problems.append(
                    """
                    the operation was still blocked \(bounds.hang) after the scope it ran in (a scope that borrows \
                    the resource) was cancelled: its wait does not join the caller's levels of cancellation. Wait \
                    through a CancellationCell, IOReactor.wait or BlockingPool bound to the handle (they join the \
                    calling task's operation and scope), not on a continuation of your own.
                    """)
                task.cancel()
                scope.cancel()
                return
            }
            Self.expectCancellation(ended, problems: &problems)
            if sawHook.load(ordering: .relaxed) {
                measurements.append("the enclosing operation's onCancel had run when the operation returned")
            } else {
                problems.append(
                    """
                    the operation returned before the onCancel of the withResourceOperation around it had run: a \
                    wait of yours resumed outside the order ResourceKit keeps (every stop hook, then the resume). \
                    Wait through a CancellationCell, IOReactor.wait or BlockingPool on the calling task; a wait in \
                    a child task (async let, a task group) is the documented exception.
                    """)
            }
        }
    }
}
