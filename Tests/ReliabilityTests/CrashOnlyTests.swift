import EmbeddedPostgres
import Foundation
import Glibc
import ResourceKit
import ResourceKitIO
import ResourceKitProcesses
import ResourceKitTesting
import TestSupport
import Testing

/// Nothing outlives the process that owns it, `kill -9` included (Docs/Architecture.md, "Nothing outlives its
/// owner"): an embedded cluster, a child started to die with its parent, and what a dead owner left behind.
@Suite(.serialized) struct CrashOnlyTests {
    /// `kill -9` of a `resource-demo pg` run in the middle of its query: the cluster's watcher stops the server and
    /// removes its directory.
    @Test func anEmbeddedClusterDiesWithItsKilledOwner() async throws {
        try await exclusively {
            let before = Set(try ProcessWatch.demoClusterDirectories())
            let demo = try DemoProcess(["pg", "--sql", "SELECT pg_sleep(30)"])
            let (postmaster, directory) = try await ProcessWatch.newDemoCluster(besides: before)
            demo.signal(SIGKILL)
            let killed = ContinuousClock.now
            #expect(try await demo.exitStatus() == 128 + SIGKILL)
            #expect(
                try await ProcessWatch.exits(postmaster, within: .seconds(10)),
                "the postmaster still runs 10 s after its owner was killed")
            #expect(
                try await ProcessWatch.removed(directory, within: .seconds(10)),
                "the cluster's directory is still there 10 s after its owner was killed")
            print("cluster gone \(ContinuousClock.now - killed) after kill -9 of its owner")
        }
    }

    /// What a dead owner left, a directory and a process that both name it, is removed by the next sweep; what a
    /// live owner (this process) left is not.
    @Test func aDeadOwnersLeftoversAreReapedAtTheNextStart() async throws {
        let me = ProcessOwner.current
        let dead = ProcessOwner(pid: me.pid, startTime: me.startTime + 1)  // this pid, another life: not alive
        #expect(!dead.isAlive && me.isAlive)
        let abandoned = try Leftovers.makeDirectory(namePrefix: "resourcekit-reaper-test-")
        try (dead.description + "\n").write(
            toFile: abandoned + "/" + ProcessOwner.fileName, atomically: true, encoding: .utf8)
        let kept = try Leftovers.makeDirectory(namePrefix: "resourcekit-reaper-test-")
        defer { try? FileManager.default.removeItem(atPath: kept) }
        // Made before owners were recorded: no owner file. Abandoned once older than the grace period, not before.
        let ownerlessOld = try Leftovers.makeDirectory(namePrefix: "resourcekit-reaper-test-")
        let ownerlessNew = try Leftovers.makeDirectory(namePrefix: "resourcekit-reaper-test-")
        defer { try? FileManager.default.removeItem(atPath: ownerlessNew) }
        defer { try? FileManager.default.removeItem(atPath: ownerlessOld) }  // only if the sweep failed to
        for directory in [ownerlessOld, ownerlessNew] {
            try FileManager.default.removeItem(atPath: directory + "/" + ProcessOwner.fileName)
        }
        try FileManager.default.setAttributes(
            [.modificationDate: Date(timeIntervalSinceNow: -120)], ofItemAtPath: ownerlessOld)
        let orphan = try Syscall.spawn(["/bin/sleep", "60"], environment: dead.environment())
        let sibling = try Syscall.spawn(["/bin/sleep", "60"], environment: me.environment())
        defer {
            kill(sibling, SIGKILL)
            _ = try? Syscall.waitForExit(sibling)
        }
        // On a thread of its own, never the shared blocking pool: the sweep waits for the processes it stops, and
        // the suites running beside this one need the pool's threads meanwhile.
        let sweep = await Leftovers.onItsOwnThread { Leftovers.sweepAbandoned() }
        #expect(sweep.processes.contains(orphan) && !sweep.processes.contains(sibling), "\(sweep)")
        #expect(sweep.directories.contains(abandoned) && !sweep.directories.contains(kept), "\(sweep)")
        #expect(sweep.directories.contains(ownerlessOld) && !sweep.directories.contains(ownerlessNew), "\(sweep)")
        // The sweep reaps a child of its own process that it stopped: the orphan is gone, not a zombie.
        #expect(
            try await ProcessWatch.exits(orphan, within: TimingBound.singleShot), "the dead owner's process still runs")
        #expect(!FileManager.default.fileExists(atPath: abandoned))
        #expect(FileManager.default.fileExists(atPath: kept))
        #expect(Syscall.exitStatusIfExited(sibling) == nil, "a live owner's process is left alone")
    }

    /// A child started with `diesWithParent` ends when its parent is killed; one started without it survives
    /// (the control: the test can tell the two apart).
    @Test(arguments: [true, false])
    func aSpawnedChildDiesWithItsParentWhenAskedTo(diesWithParent: Bool) async throws {
        let parent = try DemoProcess(
            [diesWithParent ? "dies-with-parent" : "survives-parent", "/bin/sleep", "60"],
            executable: DemoProcess.helper("rk-spawn-probe"))
        let line = try await parent.line(containing: "child ")
        let child = try #require(Int32(line.dropFirst("child ".count)))
        parent.signal(SIGKILL)
        #expect(try await parent.exitStatus() == 128 + SIGKILL)
        let ended = try await ProcessWatch.exits(child, within: diesWithParent ? .seconds(5) : .milliseconds(500))
        if !ended { kill(child, SIGKILL) }
        #expect(ended == diesWithParent, "child \(child) \(ended ? "ended" : "still ran") after its parent's kill -9")
    }

    /// A child holds no descriptor of its parent's beyond the three it is handed, even one the parent left
    /// without close-on-exec.
    @Test func aSpawnedChildInheritsOnlyItsThreeStandardDescriptors() async throws {
        let leaky = open("/dev/null", O_RDONLY)  // no O_CLOEXEC, on purpose
        try #require(leaky >= 0)
        defer { close(leaky) }
        let pipe = try Syscall.makePipe()
        defer {
            Syscall.close(pipe.read)
            Syscall.close(pipe.write)
        }
        let child = try Syscall.spawn(["/bin/sleep", "60"], standardInput: .descriptor(pipe.read))
        defer {
            kill(child, SIGKILL)
            _ = try? Syscall.waitForExit(child)
        }
        // The program itself may open files of its own while it starts (the C library's locale data), so the
        // check is by target: no descriptor of the child above 2 refers to anything the parent holds open.
        let parent = Set(DescriptorLedger.now().entries.values)
        #expect(parent.contains("/dev/null"), "the parent's descriptor without close-on-exec is open")
        var inherited: [String] = []
        for name in try FileManager.default.contentsOfDirectory(atPath: "/proc/\(child)/fd") {
            guard let fd = Int32(name), fd > 2,
                let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(child)/fd/\(name)")
            else { continue }
            if parent.contains(target) { inherited.append("\(fd) → \(target)") }
        }
        #expect(inherited.isEmpty, "the child holds the parent's descriptors: \(inherited)")
        let input = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(child)/fd/0")
        let handed = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(pipe.read)")
        #expect(input == handed, "standard input is the pipe it was handed")
    }
}
