/// One gate for every test target in the process: the heavy tests (thousands of tasks or sockets) and the
/// timing-sensitive ones take it, so a latency bound never measures another test's load. Light tests do not
/// take it. Waiters are served in arrival order.
public actor TestGate {
    public static let shared = TestGate()

    private var busy = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func acquire() async {
        if !busy {
            busy = true
            return
        }
        await withCheckedContinuation { waiters.append($0) }
    }

    func release() {
        if waiters.isEmpty {
            busy = false
        } else {
            waiters.removeFirst().resume()
        }
    }
}

/// Runs `body` while holding ``TestGate/shared``.
public func exclusively<T>(_ body: () async throws -> T) async throws -> T {
    await TestGate.shared.acquire()
    do {
        let result = try await body()
        await TestGate.shared.release()
        return result
    } catch {
        await TestGate.shared.release()
        throw error
    }
}
