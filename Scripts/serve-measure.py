#!/usr/bin/env python3
# Measures a line-protocol server from outside (#60): `Examples/TodoServer`'s `todo-server` or `resource-demo serve`,
# started here against a running Postgres server, driven by asyncio clients over loopback. Prints one JSON line per
# measurement. Nothing is asserted here: the suites assert generous bounds, this prints the figures.
#
#   python3 Scripts/serve-measure.py load       BINARY KIND URL [--clients 200] [--seconds 10] [--request 'SLEEP 0']
#   python3 Scripts/serve-measure.py deadline   BINARY todo URL [--rounds 40]
#   python3 Scripts/serve-measure.py disconnect BINARY KIND URL [--rounds 40] [--busy 100]
#   python3 Scripts/serve-measure.py sigterm    BINARY KIND URL [--clients 200] [--grace 2] [--request 'SLEEP 0.05']
#
# KIND is `todo` (todo-server: --deadline 0.5 unless the measurement needs longer) or `demo` (resource-demo serve).
# URL is a libpq URL with host and port (a Unix socket directory as `host=/dir` works: `postgresql:///postgres?host=
# /run/postgresql&port=5432`). `disconnect` and `sigterm` read pg_stat_activity through a minimal wire-protocol
# client (trust or no password: the throwaway clusters of the suite and `resource-demo pg`).
import argparse, asyncio, json, os, signal, socket, statistics, struct, subprocess, sys, time, urllib.parse


# --- a minimal Postgres client (simple query protocol, trust authentication), for pg_stat_activity ---------------
class Wire:
    def __init__(self, url):
        parts = urllib.parse.urlparse(url)
        query = dict(urllib.parse.parse_qsl(parts.query))
        host = query.get("host") or parts.hostname or "127.0.0.1"
        port = int(query.get("port") or parts.port or 5432)
        user = urllib.parse.unquote(parts.username or "postgres")
        database = (parts.path or "/postgres").lstrip("/") or "postgres"
        if host.startswith("/"):
            self.sock = socket.socket(socket.AF_UNIX)
            self.sock.connect(f"{host}/.s.PGSQL.{port}")
        else:
            self.sock = socket.create_connection((host, port))
        body = struct.pack("!I", 196608) + b"".join(
            k.encode() + b"\0" + v.encode() + b"\0" for k, v in [("user", user), ("database", database),
                                                                ("application_name", "serve-measure")]) + b"\0"
        self.sock.sendall(struct.pack("!I", len(body) + 4) + body)
        self.buffer = b""
        while True:
            kind, payload = self.message()
            if kind == b"R" and struct.unpack("!I", payload[:4])[0] != 0:
                raise SystemExit("serve-measure: the server asks for a password; use a trust cluster")
            if kind == b"E":
                raise SystemExit(f"serve-measure: {payload!r}")
            if kind == b"Z":
                return

    def message(self):
        while len(self.buffer) < 5 or len(self.buffer) < 1 + struct.unpack("!I", self.buffer[1:5])[0]:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise SystemExit("serve-measure: the server closed the connection")
            self.buffer += chunk
        length = struct.unpack("!I", self.buffer[1:5])[0]
        kind, payload, self.buffer = self.buffer[:1], self.buffer[5:1 + length], self.buffer[1 + length:]
        return kind, payload

    def rows(self, sql):
        data = sql.encode() + b"\0"
        self.sock.sendall(b"Q" + struct.pack("!I", len(data) + 4) + data)
        rows, error = [], None
        while True:
            kind, payload = self.message()
            if kind == b"D":
                count, offset, row = struct.unpack("!H", payload[:2])[0], 2, []
                for _ in range(count):
                    size = struct.unpack("!i", payload[offset:offset + 4])[0]
                    offset += 4
                    row.append(None if size < 0 else payload[offset:offset + size].decode())
                    offset += max(size, 0)
                rows.append(row)
            elif kind == b"E":
                error = payload
            elif kind == b"Z":
                if error:
                    raise SystemExit(f"serve-measure: {error!r}")
                return rows

    def active_sleeps(self):
        return [int(r[0]) for r in self.rows(
            "SELECT pid FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%pg_sleep%' "
            "AND pid <> pg_backend_pid()")]

    def client_backends(self):
        return int(self.rows("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
                             "AND pid <> pg_backend_pid()")[0][0])


# --- the server under test ----------------------------------------------------------------------------------------
def start(binary, kind, url, extra):
    if kind == "todo":
        command = [binary, "--listen", "127.0.0.1:0", "--postgres", url] + extra
    else:
        # The demo's defaults are 4 connections and 64 clients: the same as todo-server's here (16; no client limit).
        command = [binary, "serve", "--listen", "127.0.0.1:0", "--postgres", url, "--pool", "16",
                   "--max-connections", "1000"] + extra
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    first = process.stdout.readline()
    port = int(first.split(",")[0].strip().split(":")[-1])
    return process, port


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop(process):
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=60)
    return process.returncode, out


def quantile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else None


# --- measurements ---------------------------------------------------------------------------------------------------
async def load(port, clients, seconds, request):
    latencies, errors = [], {}
    end = time.monotonic() + seconds

    async def client():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        line = (request + "\n").encode()
        while time.monotonic() < end:
            sent = time.perf_counter()
            writer.write(line)
            answer = await reader.readline()
            latencies.append(time.perf_counter() - sent)
            if not answer.startswith(b"OK") and not answer.startswith(b"PONG"):
                key = answer.decode(errors="replace").strip()[:60] or "EOF"
                errors[key] = errors.get(key, 0) + 1
                if not answer:
                    return
        writer.close()

    await asyncio.gather(*(client() for _ in range(clients)))
    return latencies, errors


def measure_load(args):
    process, port = start(args.binary, args.kind, args.url, ["--deadline", "30"] if args.kind == "todo" else [])
    try:
        asyncio.run(load(port, args.clients, 1, args.request))  # warm-up: connections, pools, caches
        before = cpu_seconds(process.pid)
        started = time.monotonic()
        latencies, errors = asyncio.run(load(port, args.clients, args.seconds, args.request))
        elapsed = time.monotonic() - started
        cpu = cpu_seconds(process.pid) - before
    finally:
        status, _ = stop(process)
    print(json.dumps({
        "measurement": "load", "server": args.kind, "clients": args.clients, "request": args.request,
        "requests": len(latencies), "requests_per_second": round(len(latencies) / elapsed),
        "p50_ms": round(quantile(latencies, 0.5) * 1000, 3), "p99_ms": round(quantile(latencies, 0.99) * 1000, 3),
        "server_cpu_us_per_request": round(cpu / max(1, len(latencies)) * 1e6, 1), "errors": errors,
        "exit": status}))


def measure_deadline(args):
    process, port = start(args.binary, "todo", args.url, ["--deadline", "0.5"])
    offsets = []
    try:
        with socket.create_connection(("127.0.0.1", port)) as connection:
            reader = connection.makefile("rb")
            for _ in range(args.rounds):
                sent = time.perf_counter()
                connection.sendall(b"SLEEP 2\n")
                answer = reader.readline()
                offsets.append((time.perf_counter() - sent - 0.5) * 1000)
                if answer.strip() != b"ERR deadline exceeded":
                    raise SystemExit(f"serve-measure: unexpected answer {answer!r}")
    finally:
        status, _ = stop(process)
    print(json.dumps({
        "measurement": "deadline", "deadline_ms": 500, "rounds": len(offsets),
        "answer_minus_deadline_ms": {"min": round(min(offsets), 3), "median": round(statistics.median(offsets), 3),
                                     "p99": round(quantile(offsets, 0.99), 3), "max": round(max(offsets), 3)},
        "within_5_ms": sum(1 for o in offsets if abs(o) <= 5), "exit": status}))


def measure_disconnect(args):
    extra = ["--deadline", "60"] if args.kind == "todo" else []
    process, port = start(args.binary, args.kind, args.url, extra)
    wire = Wire(args.url)
    gone = []
    busy_stop = []
    try:
        if args.busy:
            # Clients that keep the server busy meanwhile, in a thread of their own.
            import threading
            done = threading.Event()
            busy_stop.append(done)

            def busy():
                async def run():
                    async def one():
                        reader, writer = await asyncio.open_connection("127.0.0.1", port)
                        while not done.is_set():
                            writer.write(b"SLEEP 0\n")
                            await reader.readline()
                        writer.close()
                    await asyncio.gather(*(one() for _ in range(args.busy)))
                asyncio.run(run())
            thread = threading.Thread(target=busy)
            thread.start()
            busy_stop.append(thread)
            time.sleep(1)
        for _ in range(args.rounds):
            connection = socket.create_connection(("127.0.0.1", port))
            connection.sendall(b"SLEEP 30\n")
            deadline = time.monotonic() + 10
            pids = []
            while not pids and time.monotonic() < deadline:
                pids = wire.active_sleeps()
            if not pids:
                raise SystemExit("serve-measure: the SLEEP never reached the server")
            closed = time.perf_counter()
            connection.close()
            while time.perf_counter() - closed < 10 and wire.active_sleeps():
                pass
            gone.append((time.perf_counter() - closed) * 1000)
    finally:
        if busy_stop:
            busy_stop[0].set()
            busy_stop[1].join()
        status, _ = stop(process)
    print(json.dumps({
        "measurement": "disconnect", "server": args.kind, "busy_clients": args.busy, "rounds": len(gone),
        "close_to_query_gone_ms": {"min": round(min(gone), 3), "median": round(statistics.median(gone), 3),
                                   "p90": round(quantile(gone, 0.9), 3), "max": round(max(gone), 3)},
        "exit": status}))


def measure_sigterm(args):
    grace = ["--grace", f"{args.grace:g}"]
    extra = (["--deadline", "60"] if args.kind == "todo" else []) + grace
    process, port = start(args.binary, args.kind, args.url, extra)
    wire = Wire(args.url)
    outcomes = {"ok": 0, "shutting_down": 0, "other_error": 0, "closed_before_read": 0}
    others = {}
    signalled = []

    async def client():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        line = (args.request + "\n").encode()
        while True:
            writer.write(line)
            try:
                answer = await reader.readline()
            except ConnectionError:
                answer = b""
            if answer.startswith(b"OK"):
                outcomes["ok"] += 1
            elif answer.startswith(b"ERR server shutting down"):
                outcomes["shutting_down"] += 1
            elif not answer:
                # Sent after the shutdown began: never read, never run (the connection closed unanswered).
                outcomes["closed_before_read"] += 1
                return
            else:
                outcomes["other_error"] += 1
                key = answer.decode(errors="replace").strip()[:60]
                others[key] = others.get(key, 0) + 1
            if signalled and answer.startswith(b"ERR"):
                return

    async def run():
        tasks = [asyncio.ensure_future(client()) for _ in range(args.clients)]
        await asyncio.sleep(2)
        process.send_signal(signal.SIGTERM)
        signalled.append(time.monotonic())
        await asyncio.sleep(0.2)
        refused = False
        try:
            _, late = await asyncio.open_connection("127.0.0.1", port)
            late.close()
        except ConnectionRefusedError:
            refused = True
        await asyncio.gather(*tasks, return_exceptions=True)
        return refused

    refused = asyncio.run(run())
    out, _ = process.communicate(timeout=120)
    ended = time.monotonic() - signalled[0]
    time.sleep(0.5)
    print(json.dumps({
        "measurement": "sigterm", "server": args.kind, "clients": args.clients, "request": args.request,
        "grace_s": args.grace, "outcomes": outcomes, "other_errors": others, "new_connection_refused": refused,
        "exit": process.returncode, "exit_after_signal_s": round(ended, 3),
        "client_backends_left": wire.client_backends(), "output_lines": len(out.splitlines()) + 1}))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("measurement", choices=["load", "deadline", "disconnect", "sigterm"])
    parser.add_argument("binary")
    parser.add_argument("kind", choices=["todo", "demo"])
    parser.add_argument("url")
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--request", default="SLEEP 0")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--busy", type=int, default=0)
    parser.add_argument("--grace", type=float, default=2)
    args = parser.parse_args()
    {"load": measure_load, "deadline": measure_deadline, "disconnect": measure_disconnect,
     "sigterm": measure_sigterm}[args.measurement](args)


if __name__ == "__main__":
    main()
