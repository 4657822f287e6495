import CSystemShims
import Glibc
import ResourceKit

/// The core part of the tour: a pipe read blocked on a silent writer, cancelled; then a deadline.
enum CoreTour {
    /// A pipe as a resource, just for the tour.
    final class TourPipe: ManagedResource {
        static let kind = ResourceKind(name: "demo.pipe")
        let readFD: Int32
        let writeFD: Int32

        init() throws {
            var fds: [Int32] = [0, 0]
            guard rk_pipe_nonblocking(&fds) == 0 else { throw SystemError.current("pipe2") }
            readFD = fds[0]
            writeFD = fds[1]
        }

        func cancel() {}

        func close() async throws {
            IOReactor.shared.descriptorWillClose(readFD)
            Syscall.close(readFD)
            Syscall.close(writeFD)
        }

        func read(boundTo handle: ResourceHandle) async throws -> UInt8 {
            var byte: UInt8 = 0
            while true {
                if Glibc.read(readFD, &byte, 1) == 1 { return byte }
                guard rk_errno() == EAGAIN else { throw SystemError.current("read") }
                try await IOReactor.shared.wait(for: readFD, .readable, boundTo: handle)
            }
        }
    }

    static func run() async throws {
        print("ResourceKit tour")
        print("1. A read blocked on a pipe whose writer stays silent; the task is cancelled after 100 ms.")
        let registry = ResourceRegistry()
        let task = Task {
            try await withResourceScope("tour.pipe", registry: registry) { scope in
                let pipe = try TourPipe()
                let handle = try await scope.register(pipe, kind: TourPipe.kind, label: "silent pipe")
                return try await pipe.read(boundTo: handle)
            }
        }
        try await Task.sleep(for: .milliseconds(100))
        let cancelledAt = ContinuousClock.now
        task.cancel()
        let outcome = await task.result
        let latency = ContinuousClock.now - cancelledAt
        switch outcome {
        case .success: print("   unexpected: the read completed")
        case .failure(let error): print("   outcome: \(error is CancellationError ? "cancelled" : "\(error)")")
        }
        print("   cancel-to-return: \(microseconds(latency)) µs; live resources afterwards: \(registry.liveCount)")

        print("2. The same read in a scope with a 50 ms deadline.")
        do {
            try await withResourceScope("tour.deadline", deadline: .after(.milliseconds(50)), registry: registry) { scope in
                let pipe = try TourPipe()
                let handle = try await scope.register(pipe, kind: TourPipe.kind, label: "silent pipe")
                _ = try await pipe.read(boundTo: handle)
            }
        } catch let error as DeadlineExceededError {
            print("   outcome: \(error)")
        }
        print("   live resources afterwards: \(registry.liveCount)")
    }

    static func microseconds(_ d: Duration) -> Int64 {
        let (s, atto) = d.components
        return s * 1_000_000 + atto / 1_000_000_000_000
    }
}
