import Glibc
import ResourceKit
import ResourceKitTesting
import TestSupport
import Testing

/// The kit passes a correct adapter and fails each seeded bug with the right message.
@Suite(.serialized) struct ConformanceKitTests {
    static func kit(_ bug: SeededPipe.Bug?) -> AdapterConformance<SeededPipe> {
        AdapterConformance(
            "seeded pipe (\(bug.map { "\($0)" } ?? "no bug"))",
            make: { scope in try await SeededPipe.open(bug: bug, in: scope) },
            blockingOperation: { pipe in try await pipe.readByte() },
            completeOperation: { pipe in pipe.writeByte() },
            ownedDescriptors: { pipe in pipe.descriptors }
        )
    }

    @Test func aCorrectAdapterPasses() async throws {
        let report = try await runConformance(Self.kit(nil))
        #expect(report.passed, "\(report)")
        #expect(report.checks.count == 16)
    }

    /// An operation that only its resource's `cancel()` ends: the check that cancels its task reports it as still
    /// blocked once the bounded wait (armed before the cancel) runs out, and the kit goes on.
    @Test func anOperationThatIgnoresItsTaskIsReportedBlocked() async throws {
        var kit = Self.kit(.ignoresTaskCancellation).inTheTestProcess
        kit.bounds.hang = .milliseconds(300)
        // The bound guards against a kit that hangs; it starts once the gate is held (waiting for the other heavy
        // tests is not the kit's time).
        let configured = kit
        let report = try await exclusively {
            let run = Task { () async throws -> ConformanceReport in await configured.run() }
            return try #require(await outcome(of: run, within: .seconds(120)), "the kit's run did not end").get()
        }
        let throughTask = report.checks.first { $0.name.hasPrefix("cancel while blocked, through the task") }
        #expect(throughTask?.failure?.contains("was still blocked 0.3 seconds after its task was cancelled") == true)
        #expect(throughTask?.cancelToReturn == nil, "no figure for a wait that ran out")
        let throughScope = report.checks.first { $0.name.hasPrefix("cancel while blocked, through the scope") }
        #expect(throughScope?.failure == nil, "\(report)")
    }

    /// A client with a socket per request: the kit finds the socket itself (through `ownedDescriptors`, asked while
    /// the request blocks), passes the correct client, and catches the one that leaves its socket open.
    @Test func aSocketLeftOpenByACancelledRequestIsCaught() async throws {
        let peer = try SilentPeer.python()
        defer { Task { await peer.stop() } }
        func kit(_ bug: SeededRequester.Bug?) -> AdapterConformance<SeededRequester> {
            AdapterConformance(
                "seeded requester (\(bug.map { "\($0)" } ?? "no bug"))",
                make: { scope in try await SeededRequester.open(bug: bug, port: peer.port, in: scope) },
                blockingOperation: { requester in try await requester.request() },
                ownedDescriptors: { requester in requester.sockets.descriptors })
        }
        let correct = try await exclusively { await kit(nil).inTheTestProcess.run() }
        #expect(correct.passed, "\(correct)")
        let check = correct.checks.first { $0.name.hasPrefix("the operation's own descriptors") }
        #expect(check?.measurements.contains { $0.hasPrefix("1 descriptor(s) of the operation, 0 left open") } == true)
        let buggy = try await exclusively { await kit(.leavesSocketOpen).inTheTestProcess.run() }
        #expect(buggy.failures.map(\.name) == ["the operation's own descriptors are released"], "\(buggy)")
        #expect(buggy.failures.first?.failure?.contains("LibraryDescriptors.shutdownAll()") == true)
        // A socket shut down 200 ms after the cancel, the request returning only then: stopped, but late.
        var lateKit = kit(.shutsDownLate)
        lateKit.bounds.startRounds = 10  // each round lasts the 200 ms
        let late = try await exclusively { await lateKit.inTheTestProcess.run() }
        let lateCheck = late.failures.first { $0.name == "the operation's own descriptors are released" }
        #expect(lateCheck?.failure?.contains("the transfer went on after the cancel") == true, "\(late)")
        // Shut down at the cancel, but never closed: the scope's end finds the descriptor leaked.
        let forgotten = try await exclusively { await kit(.forgetsToClose).inTheTestProcess.run() }
        let forgottenCheck = forgotten.failures.first { $0.name == "the operation's own descriptors are released" }
        #expect(forgottenCheck?.failure?.contains("close() left 1 descriptor(s) open") == true, "\(forgotten)")
    }

    /// A descriptor that a cancel opened and the close forgot is not among those the resource held when it was made:
    /// the kit asks for the resource's descriptors again before each scope ends, and reports it left open.
    @Test func aDescriptorOpenedByACancelAndLeftOpenIsCaught() async throws {
        defer { SeededPipe.closeLeakedOnPurpose() }
        let report = try await exclusively { await Self.kit(.leaksWhatCancelOpened).inTheTestProcess.run() }
        let leaks = report.failures.filter { $0.failure?.contains("descriptor(s) open (pipe)") == true }
        #expect(!leaks.isEmpty, "\(report)")
        #expect(!SeededPipe.leakedOnPurpose.withLock { $0 }.isEmpty, "the seeded cancel opened nothing")
    }

    /// A descriptor opened by every cancelled read, never closed and never reported in `ownedDescriptors`: the
    /// resource's own leak checks cannot see it; the count of the whole process's descriptors across the rounds does.
    @Test func aDescriptorLeakedByEveryCancelAndNeverReportedIsCaught() async throws {
        defer { SeededPipe.closeLeakedOnPurpose() }
        let report = try await exclusively { await Self.kit(.leaksOnEveryCancelUnreported).inTheTestProcess.run() }
        #expect(report.failures.map(\.name) == ["the process's descriptors across the kit's rounds"], "\(report)")
        #expect(report.failures.first?.failure?.contains("never closes it") == true, "\(report)")
        #expect(SeededPipe.leakedOnPurpose.withLock { $0.count } >= 100, "the seeded cancels opened too little")
    }

    @Test(arguments: [
        (SeededPipe.Bug.blockingCancel, "cancel() is fast", "must never block"),
        (.nonIdempotentCancel, "cancel() is fast", "must be idempotent"),
        (.missingClose, "closed once", "descriptor(s) open (pipe)"),
        (.lostCancelBeforeStart, "cancel before start", "was lost"),
        (.untranslatedCancellation, "cancel while blocked", "instead of CancellationError"),
        (.waitsOutsideResourceKit, "hooks run before the return", "does not join the caller's levels"),
    ])
    func eachSeededBugIsCaughtWithTheRightMessage(bug: SeededPipe.Bug, check: String, message: String) async throws {
        let report = try await exclusively { await Self.kit(bug).inTheTestProcess.run() }
        #expect(!report.passed)
        let failing = report.failures.filter { $0.name.hasPrefix(check) }
        #expect(!failing.isEmpty, "expected '\(check)' to fail:\n\(report)")
        #expect(failing.contains { $0.failure?.contains(message) == true }, "expected '\(message)':\n\(report)")
        #expect(throws: ConformanceFailure.self) { try report.check() }
    }
}
