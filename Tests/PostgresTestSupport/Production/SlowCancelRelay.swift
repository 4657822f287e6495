import Foundation
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// A TCP relay in front of one server that holds back the end of every cancel request: the server gets the
/// request at once (the backend is signalled), but the client sees the request's connection close `hold` later,
/// as behind a pooler or on a slow network. A connection pointed here learns each cancel's fate late, so its next
/// batch waits for it. Plain bytes both ways otherwise (TLS passes through). A python3 process.
public final class SlowCancelRelay: Sendable {
    private static let script =
        PythonRelay.common + """
            upstream = int(sys.argv[2])
            hold = float(sys.argv[3])
            async def accept(client_reader, client_writer):
                try:
                    first = await client_reader.readexactly(8)
                    server_reader, server_writer = await asyncio.open_connection("127.0.0.1", upstream)
                except Exception:
                    client_writer.close()
                    return
                length, code = struct.unpack("!II", first)
                server_writer.write(first)
                if code == 80877102:
                    # CancelRequest: the server closes once it has signalled the backend; the client learns it late.
                    server_writer.write(await client_reader.readexactly(length - 8))
                    await server_writer.drain()
                    await server_reader.read()
                    await asyncio.sleep(hold)
                    client_writer.close()
                    server_writer.close()
                    return
                await server_writer.drain()
                await asyncio.gather(relay(client_reader, server_writer), relay(server_reader, client_writer))
            asyncio.run(serve(accept))
            """

    private let service: BackgroundService

    public var port: Int { service.port }

    /// Starts the relay in front of 127.0.0.1:`upstream`, holding each cancel request's close back by `hold`.
    public static func start(upstream: Int, hold: Duration) async throws -> SlowCancelRelay {
        let directory = try makeDirectory("resourcekit-slow-cancel")
        let port = BackgroundProcess.freePort()
        let seconds = Double(hold.components.seconds) + Double(hold.components.attoseconds) / 1e18
        return SlowCancelRelay(
            service: try await BackgroundService.start(
                ["/usr/bin/env", "python3", "-c", script, String(port), String(upstream), String(seconds)],
                directory: directory, log: "relay.log", port: port, stopSignal: SIGKILL
            ))
    }

    private init(service: BackgroundService) {
        self.service = service
    }

    public func stop() async {
        await service.stop()
    }

    /// `conninfo` (a key=value string over TCP) pointed at this relay instead of its own port.
    public func conninfo(replacingPortOf conninfo: String) -> String {
        conninfo.replacing(/port=\d+/, with: "port=\(port)")
    }

    /// The TCP port of a key=value conninfo.
    public static func port(of conninfo: String) -> Int? {
        conninfo.firstMatch(of: /port=(\d+)/).flatMap { Int($0.1) }
    }
}
