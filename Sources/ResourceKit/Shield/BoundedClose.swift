/// Closes a resource the way ``ResourceHandle/close()`` promises: a ``SynchronouslyClosedResource`` inline; any
/// other through ``withCancellationShield(timeout:_:)``, shielded from the caller's cancellation and bounded by
/// the kind's close timeout.
enum BoundedClose {
    nonisolated(nonsending) static func run(_ resource: any ManagedResource, timeout: Duration) async -> CloseOutcome {
        let started = ContinuousClock.now
        if let immediate = resource as? any SynchronouslyClosedResource {
            do {
                try immediate.closeSynchronously()
                return .closed(ContinuousClock.now - started)
            } catch {
                return .failed(error)
            }
        }
        do {
            try await withCancellationShield(timeout: timeout) {
                try await resource.close()
            }
            return .closed(ContinuousClock.now - started)
        } catch is ShieldTimeoutError {
            return .timedOut(timeout)
        } catch {
            return .failed(error)
        }
    }
}
