/// Runs `close()` shielded from the caller's cancellation and bounded by a timeout.
enum BoundedClose {
    static func run(_ resource: any ManagedResource, timeout: Duration) async -> CloseOutcome {
        let started = ContinuousClock.now
        let cell = CancellationCell<Void>()
        do {
            try await cell.run(deadline: started + timeout, shielded: true) { cell in
                // An unstructured task does not inherit the caller's cancellation: this is the shield. If the
                // close hangs past the timeout, the task is abandoned and the overrun reported.
                Task {
                    do {
                        try await resource.close()
                        cell.succeed(())
                    } catch {
                        cell.fail(error)
                    }
                }
            }
            return .closed(ContinuousClock.now - started)
        } catch {
            if cell.cancellationReason != nil {
                return .timedOut(timeout)
            }
            return .failed(error)
        }
    }
}
