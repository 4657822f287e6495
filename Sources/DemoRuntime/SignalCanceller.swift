import Dispatch
import Glibc
package import ResourceKit

/// Turns SIGINT and SIGTERM into cancellation of the command's root task: every scope under it tears its
/// resources down at once (a running query is cancelled on the server), and the command's own cleanup (the
/// embedded Postgres) runs before the process exits with 130 or 143. A second signal exits at once.
package final class SignalCanceller {
    private let received = Locked<(first: Int32?, count: Int, cancelled: Bool)>((nil, 0, false))
    private let sources: [any DispatchSourceSignal]

    /// While set, a command that shuts down gracefully (`serve`): the first and second SIGINT/SIGTERM call it with 1
    /// and 2 instead of cancelling the command's task, and the process exits with the command's status; a third exits
    /// at once.
    package static let graceful = Locked<(@Sendable (Int) -> Void)?>(nil)

    /// The first signal received, if any.
    package var signal: Int32? { received.withLock { $0.first } }

    /// The exit status for the received signal (128 + its number) when it cancelled the command, else `nil`.
    package var exitStatus: Int32? {
        received.withLock { $0.cancelled ? $0.first.map { 128 + $0 } : nil }
    }

    package init(cancel: @escaping @Sendable () -> Void) {
        let queue = DispatchQueue(label: "resource-demo.signals")
        var sources: [any DispatchSourceSignal] = []
        let received = self.received
        for number in [SIGINT, SIGTERM] {
            Glibc.signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler {
                let graceful = Self.graceful.withLock { $0 }
                let (count, cancels) = received.withLock { received -> (Int, Bool) in
                    received.first = received.first ?? number
                    received.count += 1
                    let cancels = graceful == nil && received.count == 1
                    if cancels { received.cancelled = true }
                    return (received.count, cancels)
                }
                if cancels {
                    Console.error(
                        """
                        \(Console.program): \(number == SIGINT ? "SIGINT" : "SIGTERM"): cancelling; a second \
                        signal exits at once
                        """
                    )
                    cancel()
                } else if let graceful, count <= 2 {
                    graceful(count)
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
