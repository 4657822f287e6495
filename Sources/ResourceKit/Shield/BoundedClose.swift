/// Closes a resource the way ``ResourceHandle/close()`` promises: a ``SynchronouslyClosedResource`` inline; any
/// other through ``withCancellationShield(timeout:_:)``, shielded from the caller's cancellation and bounded by
/// the kind's close timeout.
enum BoundedClose {
    static func run(_ resource: any ManagedResource, timeout: Duration) async -> CloseOutcome {
        if let immediate = resource as? any SynchronouslyClosedResource {
            return run(immediate, timed: true)
        }
        let started = ContinuousClock.now
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

    /// Closes a ``SynchronouslyClosedResource`` inline, on the calling thread; untimed, a close that returns
    /// reports `.closed(.zero)` (two clock reads saved where nobody reads the duration).
    static func run(_ resource: any SynchronouslyClosedResource, timed: Bool) -> CloseOutcome {
        let started = timed ? StoredInstant.nanosecondsNow : 0
        do {
            try resource.closeSynchronously()
        } catch {
            return .failed(error)
        }
        guard timed else { return .closed(.zero) }
        return .closed(.nanoseconds(Int64(clamping: StoredInstant.nanosecondsNow &- started)))
    }
}
