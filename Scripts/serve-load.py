#!/usr/bin/env python3
"""Concurrent clients against `resource-demo serve` for a while; prints what they got and exits 1 on any error.

    resource-demo serve --listen 127.0.0.1:0 --postgres URL --pool 16 --max-connections 1000 &
    python3 Scripts/serve-load.py 127.0.0.1 PORT 200 15        # 200 clients for 15 seconds

Each client loops `SLEEP 0` (one query), every 10th command `SERIES 3`, and every 97th sends `SLEEP 5` and hangs
up mid-command (the server cancels that query on the server at once), then reconnects. Hung-up clients reconnect
before the server has seen their old connection close, so keep `--max-connections` well above the client count:
below it, the extras get `ERR busy`, which is the limit at work and counts as an error here.
"""
import asyncio
import sys
import time

host, port, clients, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
counts = {"ok": 0, "series": 0, "hung_up": 0, "errors": 0, "connection_errors": 0}


async def client(number):
    end = time.monotonic() + seconds
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError as error:
        counts["connection_errors"] += 1
        print(f"client {number}: {error!r}", file=sys.stderr)
        return
    command = 0
    try:
        while time.monotonic() < end:
            command += 1
            if command % 10 == 0:
                writer.write(b"SERIES 3\n")
                await writer.drain()
                lines = [(await reader.readline()).strip() for _ in range(4)]
                if lines == [b"1", b"2", b"3", b"OK"]:
                    counts["series"] += 1
                else:
                    counts["errors"] += 1
                    print(f"client {number}: SERIES 3 -> {lines}", file=sys.stderr)
            elif command % 97 == 0:
                writer.write(b"SLEEP 5\n")
                await writer.drain()
                writer.close()
                counts["hung_up"] += 1
                reader, writer = await asyncio.open_connection(host, port)
            else:
                writer.write(b"SLEEP 0\n")
                await writer.drain()
                line = (await reader.readline()).strip()
                if line == b"OK":
                    counts["ok"] += 1
                else:
                    counts["errors"] += 1
                    print(f"client {number}: SLEEP 0 -> {line}", file=sys.stderr)
        writer.write(b"QUIT\n")
        await writer.drain()
        await reader.readline()
        writer.close()
    except OSError as error:
        counts["connection_errors"] += 1
        print(f"client {number}: {error!r}", file=sys.stderr)


async def main():
    started = time.monotonic()
    await asyncio.gather(*(client(number) for number in range(clients)))
    print(counts, f"in {time.monotonic() - started:.1f} s")
    sys.exit(1 if counts["errors"] or counts["connection_errors"] else 0)


asyncio.run(main())
