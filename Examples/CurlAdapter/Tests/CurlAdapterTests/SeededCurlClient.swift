@testable import CurlAdapter
import Glibc
import ResourceKit
import ResourceKitIO

/// `CurlClient` with one of the bugs an author of an event-loop library's adapter writes, each in the part of the
/// adapter that handles cancellation (the transfer itself, `CurlTransfer`, is the example's). The kit must catch
/// each one with no probe of the author's: it sees the request's socket through `openSockets`.
final class SeededCurlClient: SynchronouslyClosedResource {
    enum Bug: String, CaseIterable, Sendable {
        /// `onCancel` only sets a flag; the loop waits outside ResourceKit (a detached task, turns of at most a
        /// second) and looks at the flag after each turn: the transfer goes on until then.
        case flagOnly
        /// No `onCancel`, no `cancel()`, and the loop waits outside ResourceKit: the transfer goes on until
        /// libcurl's own timeout (a second) ends it.
        case noCancel
        /// The loop waits with a blocking `poll(2)` on the calling task's thread: a cooperative-pool thread
        /// blocked for as long as the request lasts (a cancel's shutdown still wakes it).
        case blockingCallOnCooperativePool
        /// A cancelled request returns at once but keeps its transfer, and so its connected socket, "for later":
        /// the client finishes it when it closes.
        case socketLeftOpen
        /// A cancelled request returns at once and finishes its transfer 200 ms later, in a task of its own.
        case lateStop
    }

    static let kind = ResourceKind(name: "test.seeded-curl", closeTimeout: .seconds(5))
    let bug: Bug
    let baseURL: String
    private let registration = HandleSlot()
    private let inFlight = Locked<[ObjectIdentifier: LibraryDescriptors]>([:])
    /// `socketLeftOpen`'s transfers kept for later. Safe to send: each is only finished, once, under this lock.
    private let kept = Locked<[KeptTransfer]>([])

    private init(bug: Bug, baseURL: String) {
        self.bug = bug
        self.baseURL = baseURL
    }

    static func open(_ baseURL: String, bug: Bug, in scope: ResourceScope) async throws -> SeededCurlClient {
        let client = SeededCurlClient(bug: bug, baseURL: baseURL)
        try await client.registration.register(client, in: scope, kind: kind, label: "seeded curl client")
        return client
    }

    var openSockets: [Int32] { inFlight.withLock { $0.values.flatMap(\.descriptors) } }

    func get(_ path: String) async throws -> CurlResponse {
        let handle = registration.handle
        try handle?.checkCancellation()
        try Task.checkCancellation()
        let sockets = LibraryDescriptors()
        let transfer = try CurlTransfer(
            url: baseURL + path, sockets: sockets, timeout: bug == .noCancel ? .seconds(1) : nil)
        let key = ObjectIdentifier(sockets)
        inFlight.withLock { $0[key] = sockets }
        let flag = Locked(false)
        let hook: @Sendable (CancellationReason) -> Void =
            switch bug {
            case .flagOnly: { _ in flag.withLock { $0 = true } }
            case .blockingCallOnCooperativePool: { _ in _ = sockets.shutdownAll() }
            case .noCancel, .socketLeftOpen, .lateStop: { _ in }
            }
        var ended = false
        defer {
            if !ended {
                switch bug {
                case .socketLeftOpen:
                    kept.withLock { $0.append(KeptTransfer(transfer: transfer, key: key)) }
                case .lateStop:
                    let late = KeptTransfer(transfer: transfer, key: key)
                    Task.detached { [inFlight] in
                        try? await Task.sleep(for: .milliseconds(200))
                        late.finish(inFlight)
                    }
                default:
                    transfer.finish()
                    inFlight.withLock { $0[key] = nil }
                }
            } else {
                transfer.finish()
                inFlight.withLock { $0[key] = nil }
            }
        }
        let response = try await withResourceOperation(boundTo: handle, onCancel: hook) {
            var wake: LoopWake?
            while true {
                if let response = try transfer.drive(wake) { return response }
                if flag.withLock({ $0 }) { throw CancellationError() }
                wake = try await nextWake(transfer.interests, transfer.sockets, timer: transfer.timer, handle: handle)
            }
        }
        ended = true
        return response
    }

    private func nextWake(
        _ interests: [LoopInterest], _ sockets: LibraryDescriptors, timer: ContinuousClock.Instant?,
        handle: ResourceHandle?
    ) async throws -> LoopWake {
        switch bug {
        case .flagOnly, .noCancel:
            let turn = min(timer ?? .now + .seconds(1), .now + .seconds(1))
            // The author's own loop task, detached: neither the caller's cancel nor its operation reaches it (an
            // unstructured `Task` would inherit the operation, and ResourceKit would wake its wait anyway).
            return try await Task.detached {
                try await sockets.reactor.waitForAny(interests, heldBy: sockets, timer: turn)
            }
            .value
        case .blockingCallOnCooperativePool:
            var fds = interests.map {
                pollfd(fd: $0.fd, events: Int16($0.interest == .readable ? POLLIN : POLLOUT), revents: 0)
            }
            let wait = timer.map { max(0, Int32(($0 - .now) / .milliseconds(1))) } ?? -1
            _ = poll(&fds, nfds_t(fds.count), wait)
            guard let ready = fds.first(where: { $0.revents != 0 }) else { return .timer }
            return .ready(fd: ready.fd, ready.revents & Int16(POLLOUT) != 0 ? .writable : .readable)
        case .socketLeftOpen, .lateStop:
            return try await sockets.reactor.waitForAny(
                interests, heldBy: sockets, timer: timer, boundTo: handle)
        }
    }

    func cancel() {
        switch bug {
        case .flagOnly, .noCancel, .socketLeftOpen, .lateStop: break
        case .blockingCallOnCooperativePool:
            for sockets in inFlight.withLock({ Array($0.values) }) { _ = sockets.shutdownAll() }
        }
    }

    func closeSynchronously() {
        let transfers = kept.withLock { kept in
            defer { kept = [] }
            return kept
        }
        for transfer in transfers { transfer.finish(inFlight) }
        for sockets in inFlight.withLock({ Array($0.values) }) { _ = sockets.shutdownAll() }
    }
}

/// A transfer its request left behind, finished later by another task. Safe to send: `CurlTransfer` is used by
/// one thread at a time, and after the request returned only `finish` touches it, once (the lock).
struct KeptTransfer: @unchecked Sendable {
    let transfer: CurlTransfer
    let key: ObjectIdentifier
    private let done = Locked(false)

    init(transfer: CurlTransfer, key: ObjectIdentifier) {
        self.transfer = transfer
        self.key = key
    }

    func finish(_ inFlight: Locked<[ObjectIdentifier: LibraryDescriptors]>) {
        done.withLock { done in
            guard !done else { return }
            done = true
            transfer.finish()
        }
        inFlight.withLock { $0[key] = nil }
    }
}
