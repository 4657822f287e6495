import Dispatch
import Glibc
import ResourceKit

/// Turns SIGINT and SIGTERM into cancellation of the command's root task: every scope under it tears its
/// resources down at once (a running query is cancelled on the server), and the command's own cleanup (the
/// embedded Postgres) runs before the process exits with 130 or 143. A second signal exits at once.
package final class SignalCanceller {
    private let received = Locked<Int32?>(nil)
    private let sources: [any DispatchSourceSignal]

    /// The first signal received, if any.
    package var signal: Int32? { received.withLock { $0 } }

    /// The exit status for the received signal (128 + its number), if any.
    package var exitStatus: Int32? { signal.map { 128 + $0 } }

    package init(cancel: @escaping @Sendable () -> Void) {
        let queue = DispatchQueue(label: "resource-demo.signals")
        var sources: [any DispatchSourceSignal] = []
        let received = self.received
        for number in [SIGINT, SIGTERM] {
            Glibc.signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler {
                let first = received.withLock { received -> Bool in
                    guard received == nil else { return false }
                    received = number
                    return true
                }
                if first {
                    Console.error(
                        """
                        \(Console.program): \(number == SIGINT ? "SIGINT" : "SIGTERM"): cancelling; a second \
                        signal exits at once
                        """
                    )
                    cancel()
                } else {
                    _exit(128 + number)
                }
            }
            source.resume()
            sources.append(source)
        }
        self.sources = sources
    }
}
