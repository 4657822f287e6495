import ResourceKit
import ResourceKitIO

/// The checks for second-order bugs: what a cancel leaves behind for the *next* operation, the reason a
/// deadline carries, work left running outside the process, and effects of operations that should never have
/// started. They need what only the author can give: a request/response pair (`exchange`) and a probe of
/// the external work (`externalWorkRunning`); without them they are skipped.
extension AdapterConformance {
    /// At least ``Bounds/reuseRounds`` rounds on one resource: start the blocking operation in a task that does
    /// not own the resource, cancel that task at a random point, then run `exchange`: it must get its own reply.
    ///
    /// It also times, in the rounds whose operation was parked when cancelled, the cancel to the first exchange's
    /// reply: the median must stay within ``Bounds/externalStop``. A shared connection whose operation is stopped on
    /// the server (a cancel request, a kill sent on another connection) is free again only once the server's reply
    /// to the stopped operation has come back on the operation's own socket; a stop sent late, or not repeated
    /// after it overtook its operation, shows up here without a probe.
    func reuseAfterOperationCancel() async -> ConformanceReport.Check {
        let name = "reuse after an operation-level cancel"
        guard let exchange else { return Self.skipped(name, "no exchange given") }
        return await withFreshResource(name) { scope, resource, _, problems, measurements in
            var points = [0, 0, 0, 0]
            var freeAgain: [Duration] = []
            for round in 0..<bounds.reuseRounds {
                let (task, _) = Self.start(operation, on: resource)
                let point = Int.random(in: 0..<4)
                points[point] += 1
                switch point {
                case 0: break  // at once: often before the operation started
                case 1: await Task.yield()
                case 2: await Self.blocked(scope, within: bounds.settle)  // parked
                default: try? await Task.sleep(for: .microseconds(Int.random(in: 0...2_000)))  // anywhere
                }
                let cancelled = ContinuousClock.now
                task.cancel()
                let (ended, _) = await Self.wait(for: task, upTo: bounds.hang)
                if ended == nil {
                    problems.append(
                        """
                        round \(round): the operation was still running \(Self.text(bounds.hang)) after its task \
                        was cancelled: bind its waits to the handle or run it in withResourceOperation, so that \
                        cancelling the task that runs it resumes it.
                        """
                    )
                    break
                }
                var firstReply: ContinuousClock.Instant?
                if let problem = await exchangesAfterCancel(exchange, resource, round: round, firstReply: &firstReply) {
                    problems.append(problem)
                    break
                }
                if point == 2, let firstReply { freeAgain.append(firstReply - cancelled) }
                processRounds?.sample()
            }
            if let median = freeAgain.sorted().dropFirst(freeAgain.count / 2).first {
                measurements.append("cancel to the next exchange's reply, median \(Self.text(median))")
                if problems.isEmpty, median > bounds.externalStop {
                    problems.append(
                        """
                        after a cancel of a parked operation, the next exchange's reply came \(Self.text(median)) \
                        after the cancel (median of \(freeAgain.count) rounds; bound \
                        \(Self.text(bounds.externalStop))): \
                        the resource stayed held that long, because the server went on with the cancelled work. \
                        Send the server's stop from the cancel path at once (withResourceOperation's onCancel), not \
                        later from a detached task, and send it again until the operation's reply shows the stop \
                        (ServerStop does both): a stop that overtakes its operation finds nothing to stop.
                        """
                    )
                }
            }
            measurements.append(
                """
                \(bounds.reuseRounds) rounds; cancelled at once \(points[0]), after a yield \(points[1]), parked \
                \(points[2]), after a random pause \(points[3])
                """
            )
        }
    }

    /// Exchanges after a cancelled operation, at least ``Bounds/reuseWindow`` of them and back to back for at least
    /// ``Bounds/reuseWindowTime``: each must get its own reply. Returns the problem, if one did not.
    private func exchangesAfterCancel(
        _ exchange: @escaping @Sendable (Resource, String) async throws -> String, _ resource: Resource, round: Int,
        firstReply: inout ContinuousClock.Instant?
    ) async -> String? {
        let started = ContinuousClock.now
        var step = 0
        while step < max(bounds.reuseWindow, 1) || ContinuousClock.now - started < bounds.reuseWindowTime {
            defer { step += 1 }
            let token = "rk-reuse-\(round)-\(step)"
            let which = step == 0 ? "the next exchange" : "exchange \(step + 1) after it"
            switch await Self.exchange(exchange, resource, token: token, within: bounds.hang) {
            case .success(let reply) where reply == token:
                if step == 0 { firstReply = .now }
                continue
            case .success(let reply):
                return """
                    round \(round): after a cancelled operation, \(which) got \"\(reply.prefix(40))\" instead of \
                    its own reply \"\(token)\": the cancelled operation's late reply was read by a later \
                    operation. When an operation is cancelled after its request went out, stop the work in \
                    withResourceOperation's onCancel and discard (drain) its reply before the next operation \
                    starts, or mark the connection broken.
                    """
            case .failure(.hung):
                return """
                    round \(round): \(which) after a cancelled operation did not return within \
                    \(Self.text(bounds.hang)): the cancelled operation's work still holds the resource (a command \
                    still blocked on the server, a blocking call the cancel did not interrupt). Stop it in \
                    withResourceOperation's onCancel (a cancel request, an unblock command), or interrupt the call \
                    while it runs (BlockingPool.runInterruptible, which also ends the wait only when it returned).
                    """
            case .failure(.threw(let error as ResourceKitError)) where error.code == .connectionBroken:
                return """
                    round \(round): after a cancelled operation, \(which) found the connection broken: the cancelled \
                    operation's reply never came back, so its drain gave up. The server went on with the cancelled \
                    work: send a stop that ends it (a kill or unblock command on another connection, a cancel \
                    request) from the cancel path, and again until the reply shows it took (ServerStop).
                    """
            case .failure(.threw(let error)) where error.isResourceCancellation:
                return """
                    round \(round): a late cancel reached the next operation: \(which) after a cancelled one \
                    threw \(type(of: error)) although nothing cancelled it. Deliver a cancel (an interrupt, a \
                    cancel request) only while the cancelled operation itself runs, under the lock its completion \
                    takes: BlockingPool.runInterruptible does; an interrupt sent later from a detached task \
                    reaches whatever runs then.
                    """
            case .failure(.threw(let error)):
                return """
                    round \(round): after an operation-level cancel, \(which) threw \(type(of: error)): \
                    \(String(describing: error).prefix(200)). Cancelling one operation must leave a shared resource \
                    usable. The causes, most likely first: (1) the cancelled operation's late reply was an error \
                    (the server reporting the stop: "query canceled", "UNBLOCKED") and this exchange read it as its \
                    own: drain the cancelled operation's reply, an error reply included, before the next operation \
                    starts; (2) if the value is the library's "interrupted", a late cancel reached the next \
                    operation: deliver an interrupt only while the cancelled call runs \
                    (BlockingPool.runInterruptible), never later from a detached task; (3) the operation's \
                    onCancel shut the connection down: stop the operation, not the resource.
                    """
            }
        }
        return nil
    }

    /// A scope deadline must surface as `DeadlineExceededError`, never as `CancellationError`.
    func deadlineSurfacesAsDeadlineExceeded() async -> ConformanceReport.Check {
        let name = "a scope deadline surfaces as DeadlineExceededError"
        return await withFreshResource(name, deadline: .now + bounds.deadline) {
            _, resource, _, problems, measurements in
            let (task, _) = Self.start(operation, on: resource)
            let (ended, elapsed) = await Self.wait(for: task, upTo: bounds.deadline + bounds.hang)
            switch ended {
            case nil:
                problems.append(
                    """
                    the operation was still blocked \(Self.text(bounds.hang)) after the scope's deadline: bind its \
                    waits to the handle (the deadline cancels the handle) or pass handle.deadline on.
                    """
                )
            case .success?:
                problems.append("the operation returned normally although the scope's deadline passed.")
            case .failure(let error)? where error is DeadlineExceededError:
                measurements.append("DeadlineExceededError after \(Self.text(elapsed))")
            case .failure(let error)?:
                problems.append(
                    """
                    the scope's deadline surfaced as \(type(of: error)) instead of DeadlineExceededError: throw \
                    the reason's error (handle.cancellationReason?.error; ResourceKit's waits bound to the handle \
                    already do), never a bare CancellationError; in a composed resource register the inner parts \
                    in handle.parts so that the reason reaches them.
                    """
                )
            }
        }
    }

    /// Cancelled while its work runs outside the process (through its task, or through the resource): the
    /// author's probe must see the work stop within ``Bounds/externalStop``.
    func externalWorkStops(viaResource: Bool) async -> ConformanceReport.Check {
        let name =
            viaResource
            ? "external work stops on a resource-level cancel" : "external work stops on an operation-level cancel"
        guard let probe = externalWorkRunning else { return Self.skipped(name, "no externalWorkRunning probe given") }
        return await withFreshResource(name) { scope, resource, _, problems, measurements in
            let (task, _) = Self.start(operation, on: resource)
            let (started, _, probeError) = await Self.poll(probe, resource, until: true, within: bounds.hang)
            guard started else {
                problems.append(
                    """
                    the probe never saw the operation's work running (within \
                    \(Self.text(bounds.hang))\(probeError.map { "; it threw \(type(of: $0))" } ?? "")): check \
                    externalWorkRunning against the blocking operation.
                    """
                )
                scope.cancel()
                return
            }
            if viaResource { scope.cancel() } else { task.cancel() }
            _ = await Self.wait(for: task, upTo: bounds.hang)
            let (stopped, after, stopError) = await Self.poll(
                probe, resource, until: false, within: bounds.externalStop)
            if let stopError {
                problems.append("the probe threw \(type(of: stopError)) (\(stopError)); the check could not tell.")
            } else if stopped {
                // Keep watching: work that goes on (the probe looked in a gap) shows up again.
                let (again, when, _) = await Self.poll(probe, resource, until: true, within: bounds.externalQuiet)
                if again {
                    problems.append(
                        """
                        the probe saw the work stop \(Self.text(after)) after the operation returned, then running \
                        again \(Self.text(when)) later: the work was not stopped (the probe looked in a gap). Stop \
                        the work itself, and make the probe answer for the whole operation, not one instant.
                        """
                    )
                } else {
                    measurements.append(
                        """
                        the probe saw the work stop \(Self.text(after)) after the operation returned, and stay \
                        stopped for \(Self.text(bounds.externalQuiet))
                        """
                    )
                }
            } else if await Self.poll(probe, resource, until: false, within: bounds.hang).0 {
                // It did stop, later: the stop is started too late, not missing (a timer, a retry, another task).
                problems.append(
                    """
                    the external work was still running \(Self.text(bounds.externalStop)) after the \
                    \(viaResource ? "resource" : "operation's task") was cancelled, and stopped only later: start the \
                    stop from inside \(viaResource ? "cancel()" : "the operation's onCancel") itself (a non-blocking \
                    send), not from a timer, a retry loop or a task started there.
                    """
                )
            } else if viaResource {
                problems.append(
                    """
                    the external work was still running \(Self.text(bounds.externalStop)) after the resource was \
                    cancelled: stop it from cancel() (or from the onCancel of the operation running it), not only \
                    by waking the waiter.
                    """
                )
            } else {
                problems.append(
                    """
                    the external work was still running \(Self.text(bounds.externalStop)) after the task running \
                    the operation was cancelled (the resource was not: it is shared): run the operation in \
                    withResourceOperation and stop the work in its onCancel (a cancel request, an unblock \
                    command). cancel() runs only when the whole resource is cancelled.
                    """
                )
            }
        }
    }

    /// An operation started in an already-cancelled task throws and has no effect: the probe never sees work,
    /// and a cancelled exchange leaves nothing for the next one to read.
    func checkpoint() async -> ConformanceReport.Check {
        let name = "checkpoint: an operation in a cancelled task has no effect"
        guard exchange != nil || externalWorkRunning != nil else {
            return Self.skipped(name, "no exchange or externalWorkRunning probe given")
        }
        return await withFreshResource(name) { _, resource, _, problems, measurements in
            let (task, _) = Self.start(operation, on: resource, cancelledFirst: true)
            let (ended, _) = await Self.wait(for: task, upTo: bounds.hang)
            let fix =
                """
                Every operation must be a checkpoint: check cancellation (handle.checkCancellation() and \
                Task.checkCancellation(), or start it inside withResourceOperation) before any side effect: no \
                byte written, nothing sent to a server, nothing buffered consumed.
                """
            if let ended { Self.expectCancellation(ended, problems: &problems) }
            if let probe = externalWorkRunning {
                let (appeared, _, _) = await Self.poll(probe, resource, until: true, within: bounds.settle)
                if appeared {
                    problems.append("the probe saw work from an operation started in a cancelled task. \(fix)")
                    return
                }
                measurements.append("probe saw nothing for \(Self.text(bounds.settle))")
            }
            if let exchange {
                let (cancelled, _) = Self.start(
                    { try _ = await exchange($0, "rk-never-sent") }, on: resource, cancelledFirst: true)
                _ = await Self.wait(for: cancelled, upTo: bounds.hang)
                let token = "rk-after-checkpoint"
                switch await Self.exchange(exchange, resource, token: token, within: bounds.hang) {
                case .success(let reply) where reply == token:
                    measurements.append("the next exchange got its own reply")
                case .success(let reply):
                    problems.append(
                        """
                        an exchange in a cancelled task still sent its request: the next one got \
                        \"\(reply.prefix(40))\" instead of \"\(token)\". \(fix)
                        """
                    )
                case .failure(.hung):
                    problems.append(
                        "the exchange after a cancelled one did not return within \(Self.text(bounds.hang)). \(fix)")
                case .failure(.threw(let error)):
                    problems.append("the exchange after a cancelled one threw \(type(of: error)). \(fix)")
                }
            }
        }
    }

    static func skipped(_ name: String, _ why: String) -> ConformanceReport.Check {
        ConformanceReport.Check(name: name, failure: nil, measurements: [why], skipped: true)
    }
}
