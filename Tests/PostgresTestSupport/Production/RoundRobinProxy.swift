import Foundation
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// A TCP balancer for the tests: each new connection goes to the next upstream in turn (round robin), as a
/// cloud load balancer in front of several servers would. A python3 asyncio relay in another process, on a
/// free loopback port.
public final class RoundRobinProxy: Sendable {
    private static let script =
        PythonRelay.common + """
            upstreams = [int(p) for p in sys.argv[2:]]
            turn = 0
            async def accept(client_reader, client_writer):
                global turn
                port = upstreams[turn % len(upstreams)]
                turn += 1
                try:
                    server_reader, server_writer = await asyncio.open_connection("127.0.0.1", port)
                except Exception:
                    client_writer.close()
                    return
                await asyncio.gather(relay(client_reader, server_writer), relay(server_reader, client_writer))
            asyncio.run(serve(accept))
            """

    private let service: BackgroundService

    public var port: Int { service.port }

    /// Starts the balancer in front of 127.0.0.1:`upstreams`.
    public static func start(upstreams: [Int]) async throws -> RoundRobinProxy {
        let directory = try makeDirectory("resourcekit-proxy")
        let port = BackgroundProcess.freePort()
        return RoundRobinProxy(
            service: try await BackgroundService.start(
                ["/usr/bin/env", "python3", "-c", script, String(port)] + upstreams.map(String.init),
                directory: directory, log: "proxy.log", port: port, stopSignal: SIGKILL
            ))
    }

    private init(service: BackgroundService) {
        self.service = service
    }

    /// Stops it without waiting (for exit handlers).
    public func terminateNow() {
        service.terminateNow()
    }

    public func stop() async {
        await service.stop()
    }
}
