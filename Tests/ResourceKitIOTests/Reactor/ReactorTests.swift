import CSystemShims
import Glibc
import Synchronization
import ResourceKitTesting
import TestSupport
import Testing

@testable import ResourceKit
@_spi(Testing) @testable import ResourceKitIO

/// The reactor with real pipes, files and eventfds.
@Suite struct ReactorTests {
    @Test func waitResumesWhenDataArrives() async throws {
        let pipe = try PipeResource()
        defer { Task { try await pipe.close() } }
        let reader = Task { try await pipe.readByte(boundTo: nil) }
        pipe.writeByte()
        #expect(try await reader.value == 1)
    }

    @Test func waitDeadlineThrowsDeadlineExceeded() async throws {
        let pipe = try PipeResource()
        defer { Task { try await pipe.close() } }
        await #expect(throws: DeadlineExceededError.self) {
            try await IOReactor.shared.wait(for: pipe.readFD, .readable, deadline: .now + .milliseconds(30))
        }
    }

    @Test func descriptorClosedUnderWaiterGetsClearError() async throws {
        let pipe = try PipeResource()
        let reactor = IOReactor(name: "test.reactor.close")
        defer { reactor.shutdown() }
        let waiter = Task { try await reactor.wait(for: pipe.readFD, .readable) }
        try await until("a wait parks", reactor.waitingDescriptorCounts()) { $0 > 0 }
        reactor.descriptorWillClose(pipe.readFD)
        await #expect { try await waiter.value } throws: { ($0 as? ResourceKitError)?.code == .descriptorClosed }
        Syscall.close(pipe.readFD)
        Syscall.close(pipe.writeFD)
    }

    /// A descriptor closed behind the reactor's back and its number reused: the old waiter gets
    /// `descriptorClosed`, the new waiter on the same number gets only its own events.
    @Test func reusedDescriptorNumberNeverWakesTheWrongWaiter() async throws {
        let reactor = IOReactor(name: "test.reactor.reuse")
        defer { reactor.shutdown() }
        let first = try PipeResource(reactor: reactor)
        let number = first.readFD
        let oldWaiter = Task { try await reactor.wait(for: number, .readable) }
        try await until("a wait parks", reactor.waitingDescriptorCounts()) { $0 > 0 }
        // Close behind the reactor's back, then make `number` refer to a brand-new pipe.
        let second = try PipeResource(reactor: reactor)
        #expect(dup2(second.readFD, number) == number)
        // (Writing to the old pipe now would raise SIGPIPE: its read end is gone.)
        let newWaiter = Task { try await reactor.wait(for: number, .readable) }
        await #expect { try await oldWaiter.value } throws: { ($0 as? ResourceKitError)?.code == .descriptorClosed }
        second.writeByte()
        let events = try await newWaiter.value
        #expect(events.contains(.readable))
        for fd in [number, first.writeFD, second.readFD, second.writeFD] { Syscall.close(fd) }
    }

    @Test func regularFileIsRefusedAsNotPollable() async throws {
        let fd = open("/proc/self/status", O_RDONLY)
        #expect(fd >= 0)
        defer { Syscall.close(fd) }
        await #expect { try await IOReactor.shared.wait(for: fd, .readable) } throws: {
            ($0 as? ResourceKitError)?.code == .notPollable
        }
    }

    @Test func badDescriptorIsRefused() async {
        await #expect { try await IOReactor.shared.wait(for: 19_999, .readable) } throws: {
            ($0 as? ResourceKitError)?.code == .badDescriptor
        }
    }
}
