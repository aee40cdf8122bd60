#!/usr/bin/env python3
"""Peak memory of a daemon while N connections each pipeline two 5 MiB writes.

    scripts/memory-pipelined.py target/release/writegate [CONNECTIONS]   # default 400

Starts `writegate serve` on a socket in a scratch directory, opens the
connections, lets them all send both writes at once (a barrier), checks
every answer, and prints the daemon's VmHWM (peak resident memory). The
figure in docs/performance.md ("400 connections x two pipelined 5 MiB
writes") is this script's, on a release build. Nothing here is timed
against a bound: it prints what it measured.
"""
import json, os, socket, subprocess, sys, tempfile, threading, time

BIN = sys.argv[1]
CONNS = int(sys.argv[2]) if len(sys.argv) > 2 else 400
d = tempfile.mkdtemp(prefix="wgmem-")
ws = os.path.join(d, "ws")
os.makedirs(ws)
for x in ("home", "state", "config", "run"):
    os.makedirs(os.path.join(d, x), mode=0o700)
sock = os.path.join(d, "run", "wg.sock")
env = {"PATH": "/usr/bin:/bin", "HOME": d + "/home", "XDG_STATE_HOME": d + "/state",
       "XDG_CONFIG_HOME": d + "/config", "XDG_RUNTIME_DIR": d + "/run"}
p = subprocess.Popen([BIN, "serve", "--socket", sock, "--workspace", ws,
                      "--audit-log", d + "/state/audit.jsonl", "-q"],
                     env=env, stderr=open(d + "/err", "w"))
while not os.path.exists(sock):
    assert p.poll() is None, open(d + "/err").read()
    time.sleep(0.05)
line = ("%8s 0123456789 the quick brown fox jumps over the lazy dog\n" % "piped") * (5 * 1024 * 1024 // 64)
esc = json.dumps(line).encode()
bar = threading.Barrier(CONNS)
errs = []


def run(i):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    bar.wait()
    for k in range(2):
        path = os.path.join(ws, "c%03d-%d.txt" % (i, k))
        s.sendall(b'{"jsonrpc":"2.0","id":%d,"method":"fs/write_text_file","params":{"sessionId":"load","path":%s,"content":'
                  % (k, json.dumps(path).encode()) + esc + b'}}\n')
    f = s.makefile("rb")
    for _ in range(2):
        a = json.loads(f.readline())
        if a.get("result") != {}:
            errs.append(a)


threads = [threading.Thread(target=run, args=(i,)) for i in range(CONNS)]
t0 = time.time()
for t in threads:
    t.start()
for t in threads:
    t.join()
took = time.time() - t0
hwm = [l for l in open("/proc/%d/status" % p.pid) if l.startswith("VmHWM")][0].split()[1]
print("connections=%d errors=%d peak=%d MiB time=%.1fs load=%s" % (
    CONNS, len(errs), int(hwm) // 1024, took, open("/proc/loadavg").read().split()[0]))
p.terminate()
p.wait()
subprocess.run(["rm", "-rf", d])
sys.exit(1 if errs else 0)
