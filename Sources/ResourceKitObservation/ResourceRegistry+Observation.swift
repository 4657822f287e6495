public import ResourceKit

/// The observation surface of a registry: a snapshot, the event stream and the sink. The registry counts and
/// publishes; this module is how an application watches (Docs/Architecture.md, "Modules").
extension ResourceRegistry {
    /// Creates an empty registry that hands every lifecycle event to `sink`.
    public convenience init(sink: any ResourceEventSink) {
        self.init()
        eventSink = sink
    }

    /// The sink that receives every lifecycle event (for a logging or metrics backend), or `nil` (the default:
    /// events only reach ``events(bufferingNewest:)`` subscribers). Settable at any time, from any thread.
    public var eventSink: (any ResourceEventSink)? {
        get { eventSinkSlot?.sink as? any ResourceEventSink }
        set {
            eventSinkSlot = newValue.map { sink in .init(sink: sink, receive: { sink.receive($0) }) }
        }
    }

    /// A copy of the current state: live resources (oldest first), counters and latency per kind, the kinds.
    public func snapshot() -> RegistrySnapshot {
        RegistrySnapshot(reading())
    }

    /// A stream of lifecycle events from now on. When the consumer falls behind, the oldest events are
    /// dropped (the newest `bufferingNewest` are kept). The stream ends when the consumer stops iterating;
    /// cancelling the consuming task ends it too.
    public func events(bufferingNewest: Int = 4096) -> AsyncStream<ResourceEvent> {
        subscribeToEvents(bufferingNewest: bufferingNewest)
    }
}
