public import ResourceKit
public import ResourceKitObservation

/// The registry in the Prometheus text exposition format (version 0.0.4), the format every scraper reads.
///
/// Metric families (every label is a kind name or a fixed word: resource labels and scope paths stay out,
/// as they may be high-cardinality):
/// - `resourcekit_resources_live{kind}` (gauge): resources registered and not closed;
/// - `resourcekit_resources_acquired_total`, `_cancelled_total`, `_closed_total`, `_close_failed_total`,
///   `_close_timed_out_total` (counters) by `kind`;
/// - `resourcekit_resources_leaked_total{kind, reason}` (counter), `reason` one of
///   `deinitialized_without_close`, `close_timed_out`, `unclosed_at_scope_end`, `did_not_stop_after_cancel`
///   (the last one is a `ResourceOwner`'s shutdown watchdog; owned work is kind `resourcekit.owned-work`);
/// - `resourcekit_adapter_events_total{kind, event}` (counter): events adapters reported (for Postgres,
///   `postgres.cancel.fastPath`, `.fastPathFellBack`, `.request`, `.resent`: operation-level cancels, which
///   leave the connection alive and so are not in `_cancelled_total`; `postgres.notice.<severity>`);
/// - `resourcekit_operations_total{kind, outcome}` (counter), `outcome` one of `completed`, `cancelled`,
///   `deadline_exceeded`, `failed`: operations of the kind's resources, on borrowed (pooled) connections too; a
///   deadline the server enforced for the caller (a carried `statement_timeout`) is `deadline_exceeded`;
/// - `resourcekit_cancellation_latency_seconds{kind}` (histogram): cancel requested → cancelled wait resumed, for
///   a resource's cancel and an operation's alike.
public enum PrometheusExposition {
    /// The content type to serve it with.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// Upper bounds of the latency histogram's buckets, in seconds (1 µs to 10 s).
    static let latencyBuckets: [Double] = [
        0.000_001, 0.000_002_5, 0.000_005, 0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5,
        0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
    ]

    /// Renders `snapshot`.
    public static func render(_ snapshot: RegistrySnapshot) -> String {
        var kinds = Set(snapshot.counters.keys)
        for resource in snapshot.live { kinds.insert(resource.info.kindName) }
        let sortedKinds = kinds.sorted()
        var live: [String: Int] = [:]
        for resource in snapshot.live { live[resource.info.kindName, default: 0] += 1 }
        var text = ""

        family(&text, "resourcekit_resources_live", "gauge", "Resources registered and not yet closed.")
        for kind in sortedKinds { sample(&text, "resourcekit_resources_live", ["kind": kind], Double(live[kind] ?? 0)) }

        let counters: [(String, String, KeyPath<RegistrySnapshot.KindCounters, UInt64>)] = [
            ("acquired", "Resources registered.", \.acquired),
            ("cancelled", "Resources cancelled (by their task, scope, deadline or explicitly).", \.cancelled),
            ("closed", "Resources whose close ran.", \.closed),
            ("close_failed", "Closes that threw.", \.failed),
            ("close_timed_out", "Closes that overran the kind's close timeout.", \.closeTimedOut),
        ]
        for (word, help, path) in counters {
            let name = "resourcekit_resources_\(word)_total"
            family(&text, name, "counter", help)
            for kind in sortedKinds {
                sample(&text, name, ["kind": kind], Double(snapshot.counters[kind]?[keyPath: path] ?? 0))
            }
        }

        let leaked = "resourcekit_resources_leaked_total"
        family(&text, leaked, "counter", "Resources leaked, by reason.")
        let reasons: [(LeakReason, String)] = [
            (.deinitializedWithoutClose, "deinitialized_without_close"), (.closeTimedOut, "close_timed_out"),
            (.unclosedAtScopeEnd, "unclosed_at_scope_end"), (.didNotStopAfterCancel, "did_not_stop_after_cancel"),
        ]
        for kind in sortedKinds {
            for (reason, word) in reasons {
                let count = snapshot.counters[kind]?.leakedByReason[reason] ?? 0
                sample(&text, leaked, ["kind": kind, "reason": word], Double(count))
            }
        }

        let events = "resourcekit_adapter_events_total"
        family(
            &text, events, "counter", "Events adapters reported, by kind and event name.")
        for kind in sortedKinds {
            for (name, count) in (snapshot.counters[kind]?.adapterEvents ?? [:]).sorted(by: { $0.key < $1.key }) {
                sample(&text, events, ["kind": kind, "event": name], Double(count))
            }
        }

        let operations = "resourcekit_operations_total"
        family(&text, operations, "counter", "Operations of the kind's resources, by how they ended.")
        for kind in sortedKinds {
            for outcome in OperationOutcome.allCases {
                let count = snapshot.counters[kind]?.operations[outcome] ?? 0
                sample(&text, operations, ["kind": kind, "outcome": outcome.metricLabel], Double(count))
            }
        }

        let latency = "resourcekit_cancellation_latency_seconds"
        family(&text, latency, "histogram", "Time from a cancel request to the cancelled wait resuming.")
        for kind in sortedKinds {
            let histogram = snapshot.counters[kind]?.cancellationLatency ?? LatencyHistogram()
            for bound in latencyBuckets {
                let count = histogram.count(atMost: .nanoseconds(Int64(bound * 1_000_000_000)))
                sample(&text, latency + "_bucket", ["kind": kind, "le": number(bound)], Double(count))
            }
            sample(&text, latency + "_bucket", ["kind": kind, "le": "+Inf"], Double(histogram.count))
            sample(&text, latency + "_sum", ["kind": kind], seconds(histogram.sum))
            sample(&text, latency + "_count", ["kind": kind], Double(histogram.count))
        }
        return text
    }

    private static func family(_ text: inout String, _ name: String, _ type: String, _ help: String) {
        text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
    }

    private static func sample(_ text: inout String, _ name: String, _ labels: [String: String], _ value: Double) {
        let rendered = labels.sorted { $0.key < $1.key }.map { "\($0.key)=\"\(escape($0.value))\"" }.joined(
            separator: ",")
        text += "\(name){\(rendered)} \(number(value))\n"
    }

    /// A label value: backslash, double quote and line feed escaped, as the format requires.
    static func escape(_ value: String) -> String {
        var result = ""
        for character in value {
            switch character {
            case "\\": result += "\\\\"
            case "\"": result += "\\\""
            case "\n": result += "\\n"
            default: result.append(character)
            }
        }
        return result
    }

    /// A number as Go's `strconv.FormatFloat(v, 'g', -1, 64)` would print it (integers without a fraction).
    static func number(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }

    static func seconds(_ duration: Duration) -> Double {
        let (whole, attoseconds) = duration.components
        return Double(whole) + Double(attoseconds) / 1e18
    }
}

extension ResourceRegistry {
    /// This registry now, in the Prometheus text exposition format (see ``PrometheusExposition``): what a
    /// `/metrics` endpoint serves with ``PrometheusExposition/contentType``.
    public func prometheusExposition() -> String {
        PrometheusExposition.render(snapshot())
    }
}
