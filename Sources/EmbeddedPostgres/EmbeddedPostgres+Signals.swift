import Dispatch
import ResourceKit

#if canImport(Glibc)
import Glibc
#endif

extension EmbeddedPostgres {
    /// Stops the cluster when the process receives SIGINT or SIGTERM, then lets the signal take its default
    /// effect (the process ends with that signal). For processes with no shutdown path of their own, such as a
    /// test runner; a program that cancels its work on a signal (like `resource-demo`) stops the cluster as
    /// part of its orderly shutdown instead and should not call this.
    ///
    /// The handlers run on a dispatch queue, not in a signal handler, so stopping may block. Calling this for
    /// several clusters stops each of them.
    public func stopOnTerminationSignals() {
        let sources = EmbeddedPostgres.signalSources
        for number in [SIGINT, SIGTERM] {
            let source = sources.withLock { sources -> (any DispatchSourceSignal)? in
                if sources[number] != nil { return nil }
                signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
                sources[number] = SignalSourceBox(source)
                return source
            }
            source?.setEventHandler {
                for cluster in EmbeddedPostgres.clustersToStop.withLock({ $0 }) { cluster.stopBlocking() }
                signal(number, SIG_DFL)
                raise(number)
            }
            source?.resume()
        }
        EmbeddedPostgres.clustersToStop.withLock { $0.append(self) }
    }

    private static let clustersToStop = Locked<[EmbeddedPostgres]>([])
    private static let signalSources = Locked<[Int32: SignalSourceBox]>([:])
}

/// Keeps a signal source alive for the life of the process.
///
/// `@unchecked Sendable`: libdispatch objects are thread-safe; the box is written once under a lock and
/// never read again, it only holds the reference.
private final class SignalSourceBox: @unchecked Sendable {
    let source: any DispatchSourceSignal
    init(_ source: any DispatchSourceSignal) { self.source = source }
}
