import Foundation
import Glibc
import ResourceKit
import ResourceKitIO

extension AdapterConformance {
    /// Cancelled before the operation starts: it must throw `CancellationError` at once, not block.
    func cancelBeforeStart() async -> ConformanceReport.Check {
        await withFreshResource("cancel before start") { scope, resource, _, problems, measurements in
            let operation = self.operation
            // Owner: this check, which awaits it below.
            let task = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                try await operation(resource)
            }
            let (ended, elapsed) = await Self.wait(for: task, upTo: bounds.hang)
            guard let ended else {
                problems.append(
                    """
                    the operation blocked although its task was cancelled before it started (still running after \
                    \(bounds.hang)): the cancel arrived before your operation registered anything to wake, and was \
                    lost. Create the operation's state (or a CancellationCell) before withTaskCancellationHandler, \
                    and have onCancel mark it cancelled even when nothing is parked yet; then check that mark before \
                    you park.
                    """)
                scope.cancel()
                return
            }
            measurements.append("returned after \(Self.text(elapsed))")
            Self.expectCancellation(ended, problems: &problems)
        }
    }

    /// Cancelled while blocked (through its task, or through its scope): it must return promptly with
    /// `CancellationError`.
    func cancelWhileBlocked(viaScope: Bool) async -> ConformanceReport.Check {
        let name =
            viaScope
            ? "cancel while blocked, through the scope (resource cancel)" : "cancel while blocked, through the task"
        var measured: Duration?
        var check = await withFreshResource(name) { scope, resource, _, problems, measurements in
            // The task records when the operation returned: the figure has none of the kit's own hops in it. The
            // bounded wait is armed first, so its tasks are parked by the time of the cancel and none of the kit's
            // work runs while the operation returns (its bound runs from here: `settle` more than `hang`).
            let (task, returned) = Self.start(operation, on: resource)
            let watch = TaskWatch(task, upTo: bounds.settle + bounds.hang)
            await Self.blocked(scope, within: bounds.settle)
            let cancelled = ContinuousClock.now
            if viaScope { scope.cancel() } else { task.cancel() }
            let (ended, _) = await watch.ended()
            let elapsed = (returned.withLock { $0 } ?? .now) - cancelled
            guard let ended else {
                let what = viaScope ? "its resource was cancelled" : "its task was cancelled"
                let advice =
                    viaScope
                    ? """
                    your cancel() must wake every blocked operation (or bind operations to the handle so \
                    ResourceKit resumes them)
                    """
                    : """
                    wrap the wait in withTaskCancellationHandler (or a CancellationCell / IOReactor.wait bound to \
                    the handle) so that onCancel resumes it
                    """
                problems.append("the operation was still blocked \(bounds.hang) after \(what): \(advice).")
                if !viaScope { scope.cancel() }
                return
            }
            measurements.append("cancel to return \(Self.text(elapsed))")
            measured = elapsed
            if elapsed > bounds.promptReturn {
                problems.append(
                    """
                    the operation took \(Self.text(elapsed)) to return after the cancel (bound \
                    \(Self.text(bounds.promptReturn))): do not wait for a timeout or poll Task.isCancelled; resume \
                    from onCancel.
                    """
                )
            }
            Self.expectCancellation(ended, problems: &problems)
        }
        check.cancelToReturn = measured
        return check
    }

    /// Cancelled after the operation completed: nothing may break; the resource still closes once.
    func cancelAfterCompletion() async -> ConformanceReport.Check {
        guard let complete else {
            return ConformanceReport.Check(
                name: "cancel after completion", failure: nil, measurements: ["no completeOperation given"],
                skipped: true)
        }
        return await withFreshResource("cancel after completion") { scope, resource, _, problems, measurements in
            let operation = self.operation
            // Owner: this check, which awaits it (bounded) below.
            let task = Task { try await operation(resource) }
            await Self.blocked(scope, within: bounds.settle)
            do {
                try await complete(resource)
            } catch {
                problems.append("completeOperation threw \(type(of: error)); the check could not run.")
                scope.cancel()
                return
            }
            let (ended, _) = await Self.wait(for: task, upTo: bounds.hang)
            guard case .success? = ended else {
                problems.append(
                    """
                    the operation did not complete after completeOperation \
                    (\(ended.map { "\($0)" } ?? "still blocked")).
                    """
                )
                scope.cancel()
                return
            }
            task.cancel()
            resource.cancel()
            scope.cancel()
            measurements.append("completed, then cancelled three ways")
        }
    }

    /// `cancel()` is fast, idempotent and safe from several threads at once; it never touches a descriptor it
    /// no longer owns (canary descriptors opened between calls must survive).
    func cancelIsFastAndIdempotent() async -> ConformanceReport.Check {
        await withFreshResource("cancel() is fast, idempotent and thread-safe") {
            scope, resource, opened, problems, measurements in
            // From four threads at once first, then one call after another with a canary descriptor
            // opened after each call: a cancel() that closes a descriptor it already closed closes the canary.
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                let remaining = Locked(4)
                for _ in 0..<4 {
                    Thread {
                        for _ in 0..<25 { resource.cancel() }
                        if remaining.withLock({
                            $0 -= 1
                            return $0
                        }) == 0 {
                            done.resume()
                        }
                    }.start()
                }
            }
            // Then one call after another. Whenever one of the resource's own descriptor numbers is free, a
            // canary is placed there: a cancel() that closes a descriptor it no longer owns kills a canary.
            var durations: [Duration] = []
            var canaries: Set<Int32> = []
            var killed = 0
            // 500 rounds: another test in the same process may take a freed number before the canary is placed;
            // a non-idempotent cancel() then frees it again, and a later round places the canary. (A check by
            // the descriptors' identity was tried and dropped: a library that closes its socket in reaction to
            // the cancel, as libpq does once the server hangs up, looks the same from outside.)
            for _ in 0..<500 {
                let started = ContinuousClock.now
                resource.cancel()
                durations.append(ContinuousClock.now - started)
                for canary in canaries where !Self.isOpen(canary) {
                    killed += 1
                    canaries.remove(canary)
                }
                for number in opened.keys where !canaries.contains(number) && !Self.isOpen(number) {
                    if let canary = Self.placeCanary(at: number) { canaries.insert(canary) }
                }
            }
            let median = durations.sorted()[durations.count / 2]
            measurements.append("cancel() median \(Self.text(median)), max \(Self.text(durations.max() ?? .zero))")
            if median > bounds.cancelCall {
                problems.append(
                    """
                    cancel() took \(Self.text(median)) (median; bound \(Self.text(bounds.cancelCall))): cancel() \
                    must never block. Record the request and wake waiters; hand slow work (a network round trip, a \
                    wait for a process) to BlockingPool.shared.submit or do it in close().
                    """
                )
            }
            if killed > 0 {
                problems.append(
                    """
                    a repeated cancel() closed a descriptor it no longer owned (\(killed) canary descriptor(s), \
                    placed on the numbers the resource had released, were closed): cancel() must be idempotent. \
                    Guard it with a flag under a lock, and leave closing descriptors to close().
                    """
                )
            }
            for canary in canaries { Glibc.close(canary) }
            // The resource is still usable for ResourceKit: the scope will close it.
            _ = scope
        }
    }

    /// A scope whose body fails still closes the resource exactly once and releases its descriptors.
    func closedOnceAfterFailure() async -> ConformanceReport.Check {
        return await withFreshResource("closed once after a failure", bodyThrows: ConformanceBodyFailure()) {
            _, _, _, _, measurements in
            measurements.append("the scope's body threw")
        }
    }
}

/// The error the kit throws from a scope's body to check closing after a failure.
struct ConformanceBodyFailure: Error {}
