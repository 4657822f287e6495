import Foundation
import Glibc
@_spi(Testing) import ResourceKit
import ResourceKitObservation
import ResourceKitIO

extension AdapterConformance {
    /// Makes a resource in a fresh scope and registry, runs `body`, ends the scope (throwing `bodyThrows`
    /// from it if given), then checks that the resource was closed exactly once, in time, with every
    /// descriptor it opened released and nothing left in the registry.
    /// Waits until an operation bound to the resource's handle is running (an event: the registry publishes
    /// it); at most `settle`, for operations the adapter did not bind to the handle (which the checks then
    /// report).
    static func blocked(_ scope: ResourceScope, within settle: Duration) async {
        _ = await collectEvents(scope.registry.operationCountUpdates(), timeout: settle) { ($0.last ?? 0) > 0 }
    }

    /// ``blocked(_:within:)``, then settled: the operation's count in the registry stayed the same for `quiet` (its
    /// waits are parked, not being set up). A check whose verdict needs the waits parked when it cancels (a cancel
    /// that finds a wait still being set up is seen by it at once, without waiting for the stop hooks) waits for
    /// this; at most `settle` more.
    static func parked(_ scope: ResourceScope, within settle: Duration, quiet: Duration = .milliseconds(20)) async {
        await blocked(scope, within: settle)
        let end = ContinuousClock.now + settle
        while ContinuousClock.now < end {
            let counts = await collectEvents(scope.registry.operationCountUpdates(), timeout: quiet) { _ in false }
            if Set(counts).count <= 1 { return }
        }
    }

    func withFreshResource(
        _ name: String,
        bodyThrows: (any Error)? = nil,
        deadline: ContinuousClock.Instant? = nil,
        alsoClosedByTheEnd: Locked<[Int32: String]>? = nil,
        _ body: (ResourceScope, Resource, _ opened: [Int32: String], inout [String], inout [String]) async -> Void
    ) async -> ConformanceReport.Check {
        // The shared reactor and pool open their own descriptors on first use: not the adapter's.
        _ = IOReactor.shared.waitingDescriptorCount
        let registry = ResourceRegistry()
        var problems: [String] = []
        var measurements: [String] = []
        var opened: [Int32: String] = [:]
        let before = DescriptorLedger.now()
        var made = false
        do {
            try await withResourceScope("conformance", deadline: deadline, registry: registry) { scope in
                let resource = try await make(scope)
                made = true
                let now = DescriptorLedger.now()
                if let ownedDescriptors {
                    // Attributed by the resource itself: what other tests open meanwhile cannot count.
                    for fd in ownedDescriptors(resource) { opened[fd] = now.entries[fd] }
                } else {
                    opened = now.opened(since: before)
                    for fd in testSideDescriptors?(resource) ?? [] { opened[fd] = nil }
                }
                if registry.liveCount == 0 {
                    problems.append(
                        """
                        make did not register the resource in the scope it was given: register it with \
                        scope.register(_:kind:label:), so that the scope cancels and closes it.
                        """
                    )
                }
                await body(scope, resource, opened, &problems, &measurements)
                if let ownedDescriptors {
                    // Asked again before the scope ends: what the resource opened since (a cancel path's connection,
                    // a reconnect) must be closed by the scope's end too, not only what it held when it was made.
                    let later = DescriptorLedger.now()
                    for fd in ownedDescriptors(resource) where opened[fd] == nil { opened[fd] = later.entries[fd] }
                }
                if let bodyThrows { throw bodyThrows }
            }
        } catch {
            if !made { problems.append("make threw \(type(of: error)): \(error); the check could not run.") }
        }
        // Descriptors the body saw the resource open later (an operation's socket): closed by the scope's end too.
        opened.merge(alsoClosedByTheEnd?.withLock { $0 } ?? [:]) { made, _ in made }
        // First, the moment the scope ended: a close that only handed the work to another thread is seen here.
        var leaked = DescriptorLedger.stillOpen(opened)
        let totals = registry.snapshot().totals
        if totals.closeTimedOut > 0 {
            problems.append(
                """
                close() did not return within the kind's closeTimeout: close() must finish promptly (stop the work \
                in cancel(), which ResourceKit calls first; never wait for a peer that may never answer).
                """
            )
        } else if totals.closed != totals.acquired {
            problems.append(
                """
                \(totals.acquired) resource(s) registered but \(totals.closed) closed: every registered resource \
                must be closed by its scope.
                """
            )
        }
        if registry.liveCount != 0 {
            problems.append("\(registry.liveCount) resource(s) still live in the registry after the scope ended.")
        }
        if ownedDescriptors == nil, !leaked.isEmpty {
            // Attributed by a diff of the whole process: what another test opened during `make` and closes a
            // moment later looks like the resource's. Only what is still open once the registry was read counts
            // (so a close that does not wait is seen only with ownedDescriptors).
            leaked = DescriptorLedger.now().stillOpen(leaked)
        }
        if !leaked.isEmpty {
            problems.append(
                """
                close() left \(leaked.count) descriptor(s) open (\(Self.kinds(of: leaked))): close every \
                descriptor the resource owns in close(), once, before close() returns (await a close handed to \
                another thread; tell the reactor first: IOReactor.descriptorWillClose, or use GuardedDescriptor).
                """
            )
        }
        return ConformanceReport.Check(
            name: name,
            failure: problems.isEmpty ? nil : problems.joined(separator: "\n       "),
            measurements: measurements,
            skipped: false
        )
    }

    /// What kinds of descriptor `descriptors` are (`socket`, `pipe`, a path), once each, sorted: for a leak's message.
    static func kinds(of descriptors: [Int32: String]) -> String {
        Set(descriptors.values.map { $0.split(separator: ":").first.map(String.init) ?? $0 }).sorted()
            .joined(separator: ", ")
    }

    /// Waits for `task` at most `limit`; nil when it had not ended by then. A check that times a cancel makes the
    /// ``TaskWatch`` itself, before the cancel.
    static func wait(for task: Task<Void, any Error>, upTo limit: Duration) async -> (
        Result<Void, any Error>?, Duration
    ) {
        await TaskWatch(task, upTo: limit).ended()
    }

    /// Starts `operation` on `resource` in a task of its own (which does not own the resource's scope) that
    /// records the instant the operation returned, so that a cancel-to-return figure has no hop of the kit's in it.
    static func start(
        _ operation: @escaping @Sendable (Resource) async throws -> Void, on resource: Resource,
        cancelledFirst: Bool = false
    ) -> (Task<Void, any Error>, Locked<ContinuousClock.Instant?>) {
        let returned = Locked<ContinuousClock.Instant?>(nil)
        // Owner: the check that called `start`, which awaits it (bounded by `hang`).
        let task = Task {
            if cancelledFirst { withUnsafeCurrentTask { $0?.cancel() } }
            defer { returned.withLock { $0 = .now } }
            try await operation(resource)
        }
        return (task, returned)
    }

    /// Asks `probe` every few milliseconds until it answers `wanted` or `limit` passes; returns whether it did,
    /// after how long, and the probe's last error if it threw. Polling is the only way to watch work outside
    /// the process (a server's status). The probe runs outside the check's scope, which may be cancelled, and
    /// in a task of its own: a cancelled caller neither turns the pauses into a busy loop nor fails the probe.
    static func poll(
        _ probe: @escaping @Sendable (Resource) async throws -> Bool, _ resource: Resource, until wanted: Bool,
        within limit: Duration
    ) async -> (Bool, Duration, (any Error)?) {
        // Owner: this function, which awaits it; the loop ends by itself within `limit`.
        await Task {
            let started = ContinuousClock.now
            while true {
                let answer = await withoutResourceScope {
                    do { return Result<Bool, any Error>.success(try await probe(resource)) } catch {
                        return .failure(error)
                    }
                }
                if case .success(wanted) = answer { return (true, ContinuousClock.now - started, nil) }
                if ContinuousClock.now - started > limit {
                    if case .failure(let error) = answer { return (false, ContinuousClock.now - started, error) }
                    return (false, ContinuousClock.now - started, nil)
                }
                try? await Task.sleep(for: .milliseconds(5))  // never cancelled: nothing holds this task
            }
        }.value
    }

    /// Runs `exchange` with `token`, bounded by `limit`: the reply, or what went wrong.
    static func exchange(
        _ exchange: @escaping @Sendable (Resource, String) async throws -> String, _ resource: Resource,
        token: String, within limit: Duration
    ) async -> Result<String, ExchangeProblem> {
        let reply = Locked<String?>(nil)
        // Owner: this function, which awaits it (bounded by `limit`).
        let task = Task {
            let answer = try await exchange(resource, token)
            reply.withLock { $0 = answer }
        }
        let (ended, _) = await wait(for: task, upTo: limit)
        switch ended {
        case nil:
            task.cancel()
            return .failure(.hung)
        case .failure(let error)?:
            return .failure(.threw(error))
        case .success?:
            return .success(reply.withLock { $0 } ?? "")
        }
    }

    enum ExchangeProblem: Error {
        case hung
        case threw(any Error)
    }

    /// A cancelled operation must throw `CancellationError`, nothing else.
    static func expectCancellation(_ result: Result<Void, any Error>, problems: inout [String]) {
        switch result {
        case .success:
            problems.append(
                """
                the operation returned normally although it was cancelled: throw CancellationError, so that \
                callers never mistake a cancelled operation for a finished one.
                """
            )
        case .failure(let error) where error is CancellationError:
            break
        case .failure(let error):
            problems.append(
                """
                the cancelled operation threw \(type(of: error)) (\(error)) instead of CancellationError: \
                translate your native cancellation (ECANCELED, a 'cancelled' status, the error a torn-down handle \
                gives) into CancellationError; keep your own error type for genuine failures.
                """
            )
        }
    }

    /// Puts a canary descriptor at `number` if that number is free (never displacing anything: `F_DUPFD`
    /// takes the lowest free number at or above it). Returns the number if the canary landed there.
    static func placeCanary(at number: Int32) -> Int32? {
        let source = open("/dev/null", O_RDONLY | O_CLOEXEC)
        if source == number { return source }  // the lowest free number was this one
        defer { Glibc.close(source) }
        let canary = fcntl(source, F_DUPFD_CLOEXEC, number)
        if canary == number { return canary }
        if canary >= 0 { Glibc.close(canary) }
        return nil
    }

    static func isOpen(_ fd: Int32) -> Bool { fcntl(fd, F_GETFD) != -1 }

    static func text(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let microseconds = Double(seconds) * 1e6 + Double(attoseconds) / 1e12
        return microseconds >= 1000
            ? String(format: "%.1f ms", microseconds / 1000) : String(format: "%.1f µs", microseconds)
    }
}
