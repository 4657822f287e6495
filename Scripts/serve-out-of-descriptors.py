#!/usr/bin/env python3
# Measures `resource-demo serve` out of descriptors (#60): under `ulimit -n 80`, 150 clients connect; prints the
# server's CPU over 3 s of the accept pause, the descriptors it holds, whether the first client and one after the
# crowd left are served, the exit status after SIGTERM, its output lines, and the accept pause/resume lines.
# (The suite asserts bounds on the same: ServeTests.outOfDescriptorsTheServerBacksOffAndServesAgain.)
#
#   python3 Scripts/serve-out-of-descriptors.py .build/debug/resource-demo 'host=... port=... dbname=...' [--metrics 127.0.0.1:0]
import os, socket, subprocess, sys, time, re
demo, conninfo = sys.argv[1], sys.argv[2]
extra = sys.argv[3:]
p = subprocess.Popen(["sh", "-c", 'ulimit -n 80 && exec "$0" "$@"', demo, "serve", "--listen", "127.0.0.1:0",
                      "--postgres", conninfo] + extra, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
line = p.stdout.readline()
port = int(line.strip().split(":")[-1])
clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(150)]
time.sleep(1)
def cpu():
    f = open(f"/proc/{p.pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
c0 = cpu(); time.sleep(3); used = cpu() - c0
fds = len(os.listdir(f"/proc/{p.pid}/fd"))
clients[0].sendall(b"PING\n"); first = clients[0].recv(100)
for c in clients: c.close()
time.sleep(1.5)
late = socket.create_connection(("127.0.0.1", port)); late.sendall(b"PING\n"); second = late.recv(100); late.close()
p.send_signal(15)
out, _ = p.communicate(timeout=30)
lines = [line] + out.splitlines()
print(f"cpu over 3 s of the pause: {used:.2f} s; descriptors open: {fds}/80; first client: {first!r}; "
      f"after they left: {second!r}; output lines: {len(lines)}; exit {p.returncode}")
print("\n".join(l for l in lines if "accept" in l))
