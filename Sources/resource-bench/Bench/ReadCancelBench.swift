import DemoRuntime
import FileAdapter
import Foundation
import Glibc
import ResourceKit
import ResourceKitIO
import ResourceKitTesting
import SocketAdapter

/// Figures 1 and 2: `task.cancel()` to the task returning, for a read blocked on a silent socket peer or a
/// silent FIFO writer, beside the polling baseline, the Swift floor and the raw limit. Every latency is
/// measured from a task on the cooperative pool.
enum ReadCancelBench {
    /// Cancels `task` once `parked()` holds; returns cancel-to-return.
    ///
    /// `parked()` turns true just before the task suspends (a waiter is registered, a continuation stored);
    /// a short pause then lets it finish suspending, so that every figure (ours and the floor alike) times
    /// the cancel of a read that is really blocked, not a race with a task still on its way into the wait.
    static func cancelLatency<T: Sendable>(_ task: Task<T, any Error>, parked: () -> Bool) async -> Duration {
        while !parked() { await Task.yield() }
        try? await Task.sleep(for: .microseconds(200))  // a pause; the benchmark has no canceller
        let start = ContinuousClock.now
        task.cancel()
        _ = await task.result
        return ContinuousClock.now - start
    }

    static func socket(rounds: Int, pollingRounds: Int) async throws -> [Samples] {
        let reactor = IOReactor(name: "bench.socket")
        defer { reactor.shutdown() }
        var ours: [Duration] = []
        var floor: [Duration] = []
        var polling: [Duration] = []
        try await withResourceScope("bench.socket", registry: ResourceRegistry()) { scope in
            let listener = try await SocketListener.bind(in: scope)
            // Connect every pair first: connecting resolves on the blocking pool, whose threads would
            // still be busy during the measurement.
            var pairs: [(SocketConnection, SocketConnection)] = []
            for _ in 0..<rounds {
                let connection = try await SocketConnection.connect(
                    host: "127.0.0.1", port: listener.port, in: scope, reactor: reactor)
                pairs.append((connection, try await listener.accept(in: scope)))
            }
            try await Task.sleep(for: .milliseconds(20))
            // Each round measures the Swift floor right before ours, so both see the same machine state.
            for (connection, _) in pairs {
                floor.append(await floorSample())
                // Owner: this round (`cancelLatency` cancels and awaits it).
                let task = Task { try await connection.read(upTo: 64) }
                ours.append(await cancelLatency(task) { reactor.waitingDescriptorCount > 0 })
            }
            for (connection, peer) in pairs {
                connection.resetConnection()
                peer.resetConnection()
            }
        }
        // The baseline reads a plain socket of the same kind (no adapter at all).
        let (client, server) = try RawLoopback.pair()
        defer {
            Syscall.close(client)
            Syscall.close(server)
        }
        for _ in 0..<pollingRounds { polling.append(try await pollingBaseline(client)) }
        return [
            Samples("socket read: cancel -> return", durations: ours),
            Samples("polling loop (Task.isCancelled every 10 ms)", durations: polling),
            Samples("Swift floor, measured between the rounds", durations: floor),
        ]
    }

    /// The conformance kit's own "cancel while blocked, through the task" figure for a socket read on a silent
    /// peer (another process), `runs` times: it must stay close to the bare measurement above, since the kit
    /// times inside the operation's task.
    static func kitFigure(runs: Int) async throws -> Samples {
        let peer = try SilentPeerMode.spawn()
        var kit = AdapterConformance<SocketConnection>(
            "SocketConnection",
            make: { scope in try await SocketConnection.connect(host: "127.0.0.1", port: peer.port, in: scope) },
            blockingOperation: { connection in _ = try await connection.read(upTo: 64) }
        )
        kit.bounds.deadline = .milliseconds(50)
        var figures: [Duration] = []
        for _ in 0..<runs {
            let report = await kit.run()
            let check = report.checks.first { $0.name.hasPrefix("cancel while blocked, through the task") }
            if let figure = check?.cancelToReturn { figures.append(figure) }
        }
        await peer.stop()
        return Samples("conformance kit's figure for the same read", durations: figures)
    }

    static func fifo(rounds: Int, pollingRounds: Int) async throws -> [Samples] {
        let fifo = try SilentFIFO(name: "bench")
        let path = fifo.path
        let reactor = IOReactor(name: "bench.fifo")
        defer { reactor.shutdown() }
        var ours: [Duration] = []
        var floor: [Duration] = []
        try await withResourceScope("bench.fifo", registry: ResourceRegistry()) { scope in
            for _ in 0..<rounds {
                floor.append(await floorSample())
                let reader = try await StreamReader.open(path: path, in: scope, reactor: reactor)
                // Owner: this round (`cancelLatency` cancels and awaits it).
                let task = Task { try await reader.read() }
                ours.append(await cancelLatency(task) { reactor.waitingDescriptorCount > 0 })
            }
        }
        let reader = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        defer { Syscall.close(reader) }
        var polling: [Duration] = []
        for _ in 0..<pollingRounds { polling.append(try await pollingBaseline(reader)) }
        withExtendedLifetime(fifo) {}
        return [
            Samples("FIFO read: cancel -> return", durations: ours),
            Samples("polling loop (Task.isCancelled every 10 ms)", durations: polling),
            Samples("Swift floor, measured between the rounds", durations: floor),
        ]
    }

    /// What users write without adapters: wait up to 10 ms for data, then look at `Task.isCancelled`.
    static func pollingBaseline(_ fd: Int32) async throws -> Duration {
        let parked = Locked(false)
        // Owner: this round, which cancels and awaits it.
        let task = Task<Void, any Error> {
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            while !Task.isCancelled {
                parked.withLock { $0 = true }
                _ = poll(&entry, 1, 10)
            }
            throw CancellationError()
        }
        // Cancel at a random point of the 10 ms cycle, as a real cancel would land.
        while !parked.withLock({ $0 }) { await Task.yield() }
        let offset = Duration.microseconds(Int64.random(in: 0..<10_000))
        try await Task.sleep(for: offset)
        let start = ContinuousClock.now
        task.cancel()
        _ = await task.result
        return ContinuousClock.now - start
    }

    /// One round of the Swift floor: a task suspended in a bare continuation that `onCancel` resumes; no I/O.
    static func floorSample() async -> Duration {
        let slot = Locked<(parked: CheckedContinuation<Void, Never>?, cancelled: Bool)>((nil, false))
        // Owner: this round (`cancelLatency` cancels and awaits it).
        let task = Task<Void, any Error> {
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    let resumeNow = slot.withLock { slot -> Bool in
                        if slot.cancelled { return true }
                        slot.parked = continuation
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            } onCancel: {
                let continuation = slot.withLock { slot -> CheckedContinuation<Void, Never>? in
                    slot.cancelled = true
                    defer { slot.parked = nil }
                    return slot.parked
                }
                continuation?.resume()
            }
        }
        return await cancelLatency(task) { slot.withLock { $0.parked != nil } }
    }

    /// The raw limit: a plain thread blocked in `poll()`, woken through an eventfd; from the write to the
    /// thread running again.
    static func rawLimit(rounds: Int) async -> Samples {
        var samples: [Duration] = []
        for _ in 0..<rounds {
            guard let eventFD = try? Syscall.makeEventFD() else { continue }
            let woke = Locked<ContinuousClock.Instant?>(nil)
            let blocked = Locked(false)
            let thread = Thread {
                var entry = pollfd(fd: eventFD, events: Int16(POLLIN), revents: 0)
                blocked.withLock { $0 = true }
                _ = poll(&entry, 1, -1)
                woke.withLock { $0 = .now }
            }
            thread.start()
            while !blocked.withLock({ $0 }) { await Task.yield() }
            // Let the thread reach poll() (it announced itself just before the call).
            try? await Task.sleep(for: .microseconds(200))  // a pause; the benchmark has no canceller
            let start = ContinuousClock.now
            Syscall.signalEventFD(eventFD)
            var end: ContinuousClock.Instant?
            while end == nil {
                end = woke.withLock { $0 }
                if end == nil { await Task.yield() }
            }
            samples.append(end! - start)
            Syscall.close(eventFD)
        }
        return Samples("raw limit (thread in poll(), eventfd wake)", durations: samples)
    }
}

/// Loopback TCP sockets made with plain system calls (no adapter): the benchmark's references and its
/// peer process.
enum RawLoopback {
    /// A socket listening on 127.0.0.1 on a port the kernel picked.
    static func listener(backlog: Int32) throws -> (fd: Int32, port: UInt16) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                bind(fd, raw, length) == 0 && listen(fd, backlog) == 0 && getsockname(fd, raw, &length) == 0
            }
        }
        guard listening else {
            let error = SystemError.current("bind")
            Syscall.close(fd)
            throw error
        }
        return (fd, UInt16(bigEndian: address.sin_port))
    }

    /// A connected pair: the client's end and the accepted end.
    static func pair() throws -> (client: Int32, server: Int32) {
        let listener = try listener(backlog: 1)
        defer { Syscall.close(listener.fd) }
        var address = loopback(port: listener.port)
        let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        let length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, length) }
        }
        guard connected == 0 else { throw SystemError.current("connect") }
        let server = accept(listener.fd, nil, nil)
        guard server >= 0 else { throw SystemError.current("accept") }
        return (client, server)
    }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        return address
    }
}
