// README, "Observability": the bridge to swift-log and swift-metrics (`Logging` and `Metrics` here are
// stand-ins with the signatures it calls). Glue: the function around the last statement.
// snippet: readme-event-sink
import Logging
import Metrics
import ResourceKit
import ResourceKitObservation

struct OperatorSink: ResourceEventSink {
    let logger = Logger(label: "resourcekit")
    func receive(_ event: ResourceEvent) {
        let kind = event.resource.kindName
        switch event.what {
        case .acquired: Counter(label: "resourcekit_acquired", dimensions: [("kind", kind)]).increment()
        case .cancelRequested(let reason): Counter(label: "resourcekit_cancelled", dimensions: [("kind", kind), ("reason", "\(reason)")]).increment()
        case .leaked(let reason): logger.warning("resource leaked", metadata: ["kind": "\(kind)", "reason": "\(reason)"])
        case .closeTimedOut(let after): logger.error("close overran", metadata: ["kind": "\(kind)", "after": "\(after)"])
        case .adapter(let name): Counter(label: "resourcekit_adapter_events", dimensions: [("kind", kind), ("event", name)]).increment()
        default: break
        }
    }
}
func installSink() {  // glue
    ResourceRegistry.shared.eventSink = OperatorSink()
}  // glue
// end snippet
