import TestSupport

/// The python3 parts the test proxies share: copying one direction of a TCP connection until its end, and
/// serving an `accept` coroutine on a loopback port (given as the first argument).
enum PythonRelay {
    static let common = """
        import asyncio, struct, sys
        async def relay(reader, writer):
            try:
                while True:
                    data = await reader.read(65536)
                    if not data:
                        break
                    writer.write(data)
                    await writer.drain()
            except Exception:
                pass
            finally:
                try:
                    writer.close()
                except Exception:
                    pass
        async def serve(accept):
            server = await asyncio.start_server(accept, "127.0.0.1", int(sys.argv[1]), backlog=512)
            async with server:
                await server.serve_forever()

        """
}
