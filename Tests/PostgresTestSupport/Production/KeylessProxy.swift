import Foundation
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// A proxy in front of one server that removes BackendKeyData from every session's startup, as some proxies
/// do (scenario 19): the client never learns a cancel key. Plain TCP (clients use
/// `sslmode=disable`); a python3 relay that parses the server's messages until the first ReadyForQuery.
public final class KeylessProxy: Sendable {
    private static let script =
        PythonRelay.common + """
            upstream = int(sys.argv[2])
            async def startup(reader, writer):
                # Server messages until the first ReadyForQuery ('Z'), without BackendKeyData ('K').
                while True:
                    kind = await reader.readexactly(1)
                    length = struct.unpack("!I", await reader.readexactly(4))[0]
                    body = await reader.readexactly(length - 4)
                    if kind != b"K":
                        writer.write(kind + struct.pack("!I", length) + body)
                        await writer.drain()
                    if kind in (b"Z", b"E"):
                        return
            async def accept(client_reader, client_writer):
                try:
                    server_reader, server_writer = await asyncio.open_connection("127.0.0.1", upstream)
                except Exception:
                    client_writer.close()
                    return
                to_server = asyncio.ensure_future(relay(client_reader, server_writer))
                try:
                    await startup(server_reader, client_writer)
                except Exception:
                    client_writer.close()
                    return
                await asyncio.gather(to_server, relay(server_reader, client_writer))
            asyncio.run(serve(accept))
            """

    private let service: BackgroundService

    public var port: Int { service.port }

    /// Starts the proxy in front of 127.0.0.1:`upstream`.
    public static func start(upstream: Int) async throws -> KeylessProxy {
        let directory = try makeDirectory("resourcekit-keyless")
        let port = BackgroundProcess.freePort()
        return KeylessProxy(
            service: try await BackgroundService.start(
                ["/usr/bin/env", "python3", "-c", script, String(port), String(upstream)],
                directory: directory, log: "proxy.log", port: port, stopSignal: SIGKILL
            ))
    }

    private init(service: BackgroundService) {
        self.service = service
    }

    public func stop() async {
        await service.stop()
    }
}
