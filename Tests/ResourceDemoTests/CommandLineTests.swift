import ResourceKit
import Foundation
import Glibc
import TestSupport
import Testing

/// The CLI contract without a database: usage errors, help, files, FIFOs and sockets.
@Suite struct CommandLineTests {
    @Test(arguments: [
        (["--bogus"], "--bogus"),
        (["pg"], "--sql"),
        (["pg", "--sql", "SELECT 1", "--cancel-after", "5x"], "--cancel-after"),
        (["socket", "--connect", "nohostport"], "--connect"),
        (["file", "--path"], "--path"),
        (["serve", "--pool", "0"], "--pool"),
        (["serve", "--reactors", "0"], "--reactors"),
        (["latest", "--debounce", "-1s"], "--debounce"),
        (["frobnicate"], "frobnicate"),
    ])
    func usageErrorsExitTwoAndNameTheFlag(arguments: [String], named flag: String) async throws {
        let (status, process) = try await DemoProcess.run(arguments)
        #expect(status == 2)
        #expect(process.standardError.contains(flag), "stderr: \(process.standardError)")
    }

    @Test func helpAndVersion() async throws {
        let (status, process) = try await DemoProcess.run(["--help"])
        #expect(status == 0)
        #expect(process.standardOutput.contains("resource-demo [tour]"), "the tour is the default command")
        for command in ["pg", "socket", "file", "latest", "listen", "copy", "serve", "bench"] {
            #expect(process.standardOutput.contains("resource-demo \(command)"), "--help does not list \(command)")
        }
        let (pgStatus, pg) = try await DemoProcess.run(["pg", "--help"])
        #expect(pgStatus == 0 && pg.standardOutput.contains("--cancel-after"))
        let (versionStatus, version) = try await DemoProcess.run(["--version"])
        #expect(versionStatus == 0 && version.standardOutput.hasPrefix("resource-demo "))
    }

    /// The command table is the one source: the guide's usage block (`Docs/Guides/resource-demo.md`) lists exactly
    /// the synopses `--help` prints.
    @Test func theGuideListsTheCommandTable() async throws {
        let (status, process) = try await DemoProcess.run(["--help"])
        #expect(status == 0)
        let synopses = process.standardOutput.split(separator: "\n")
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { $0.hasPrefix("resource-demo ") }
        #expect(synopses.count == 10, "nine commands and the help line")
        let readmePath = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../Docs/Guides/resource-demo.md").standardizedFileURL.path
        let readme = try String(contentsOfFile: readmePath, encoding: .utf8)
        let block = try #require(readme.components(separatedBy: "```\nresource-demo [tour]").dropFirst().first)
        let documented = ("resource-demo [tour]" + block.components(separatedBy: "```")[0])
            .split(separator: "\n").map(String.init)
        #expect(documented == synopses, "the guide's usage block and --help differ")
    }

    @Test func fileCopiesARegularFileAndMissingFileFails() async throws {
        let path = "/tmp/resource-demo-file-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try "hello\nworld\n".write(toFile: path, atomically: true, encoding: .utf8)
        defer { unlink(path) }
        let (status, process) = try await DemoProcess.run(["file", "--path", path])
        #expect(status == 0)
        #expect(process.standardOutput == "hello\nworld\n")

        let (missingStatus, missing) = try await DemoProcess.run(["file", "--path", path + ".missing", "--json"])
        #expect(missingStatus == 1)
        #expect(missing.jsonLines.first?["outcome"] as? String == "failed")
    }

    @Test func fifoReadCancelledAfterADurationExitsZero() async throws {
        let path = "/tmp/resource-demo-fifo-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        #expect(mkfifo(path, 0o600) == 0)
        defer { unlink(path) }
        let writer = open(path, O_RDWR | O_NONBLOCK)  // a writer that stays silent
        defer { close(writer) }
        let (status, process) = try await DemoProcess.run(["file", "--path", path, "--cancel-after", "100ms", "--json"])
        #expect(status == 0)
        let line = try #require(process.jsonLines.first)
        #expect(line["outcome"] as? String == "cancelled")
        let latency = try #require(line["cancel_to_return_us"] as? Int)
        #expect(latency >= 0 && latency < 1_000_000)
    }

    @Test func socketRefusedFailsAndSilentPeerIsCancelled() async throws {
        let refusing = LoopbackPort()  // bound, not listening: connections are refused
        let (refusedStatus, refused) = try await DemoProcess.run([
            "socket", "--connect", "127.0.0.1:\(refusing.port)", "--json",
        ])
        #expect(refusedStatus == 1)
        #expect(refused.jsonLines.first?["outcome"] as? String == "failed")

        let silent = LoopbackPort(listen: 16)
        let (status, process) = try await DemoProcess.run([
            "socket", "--connect", "127.0.0.1:\(silent.port)", "--cancel-after", "100ms", "--json",
        ])
        #expect(status == 0)
        #expect(process.jsonLines.first?["outcome"] as? String == "cancelled")
    }

    /// A cancelled run reports the bytes it copied before the cancel (the JSON said `null` once, although the
    /// peer had sent them and the plain output showed them).
    @Test func aCancelledSocketRunReportsTheBytesItCopied() async throws {
        let listener = LoopbackPort(listen: 16)
        let accepted = Locked<Int32?>(nil)
        let done = DispatchSemaphore(value: 0)
        let listenerFD = listener.fd
        // The peer: accepts one connection, sends four bytes, then stays silent until the test ends.
        Thread {
            let fd = accept(listenerFD, nil, nil)
            if fd >= 0 {
                _ = write(fd, "ping", 4)
                accepted.withLock { $0 = fd }
            }
            done.signal()
        }.start()
        let (status, process) = try await DemoProcess.run([
            "socket", "--connect", "127.0.0.1:\(listener.port)", "--cancel-after", "1s", "--json",
        ])
        shutdown(listenerFD, Int32(SHUT_RDWR))  // wakes the peer's accept if the demo never connected
        done.wait()
        if let fd = accepted.withLock({ $0 }) { close(fd) }
        #expect(status == 0)
        let line = try #require(process.jsonLines.first)
        #expect(line["outcome"] as? String == "cancelled")
        #expect(line["bytes"] as? Int == 4, "\(line)")
    }
}
