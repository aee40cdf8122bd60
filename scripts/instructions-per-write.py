#!/usr/bin/env python3
"""User-space instructions per 1 KiB overwrite through the daemon (ADR 0009).

Runs `writegate serve --socket` under valgrind's callgrind twice, on a
workspace in a fresh temp directory: once with 64 warm-up writes only, once
with the warm-up and then N overwrites of the same 64 files, driven by one
blocking client over the socket. The difference of the two programs' totals,
divided by N, is the user-space instructions a write costs, start-up and
warm-up left out. It repeats to within about 2 % (the release and flush
threads' work, counted too, depends on timing), where CPU time on a shared
VM moves by 10 %; a change to the request path can be judged by it before
the noisy benches. The top inclusive writegate
functions of the longer run are printed too, and the code footprint of a
write: how many distinct 64-byte cache lines and 4 KiB pages of code every
write runs. Each write finds most of it evicted by the kernel's work since
the last one (its fsyncs above all), so the footprint, not only the count,
sets what the user code costs here (docs/decisions/0009-small-write-costs.md).

Two caveats, both the same for every build compared:
- valgrind's CPU has no SHA extensions, so SHA-256 runs the portable code
  and counts several times what it costs with SHA-NI;
- valgrind does not know `openat2`: the directory is opened by the
  component walk the daemon falls back to.

Usage: scripts/instructions-per-write.py [BINARY] [N]
(default: target/release/writegate, N = 500). Needs valgrind (Debian:
`valgrind`). Prints figures; asserts nothing.
"""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WARM_UP = 64
CONTENT = ("x" * 63 + "\n") * 16  # 1 KiB, LF


def run(binary, writes, out):
    """Runs the daemon under callgrind for WARM_UP + `writes` writes."""
    base = tempfile.mkdtemp(prefix="wg-instr-")
    try:
        os.chmod(base, 0o700)
        ws = os.path.join(base, "ws")
        for d in ("ws", "home", "run", "state", "config"):
            os.makedirs(os.path.join(base, d))
        sock = os.path.join(base, "s.sock")
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": os.path.join(base, "home"),
            "XDG_RUNTIME_DIR": os.path.join(base, "run"),
            "XDG_STATE_HOME": os.path.join(base, "state"),
            "XDG_CONFIG_HOME": os.path.join(base, "config"),
        }
        with open(os.path.join(base, "daemon.stderr"), "w") as err:
            daemon = subprocess.Popen(
                ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
                 "--dump-instr=yes", binary, "serve", "--socket", sock, "--workspace", ws,
                 "--audit-log", os.path.join(base, "audit.jsonl")],
                env=env, stderr=err)
            try:
                deadline = time.time() + 120
                while True:
                    try:
                        conn = socket.socket(socket.AF_UNIX)
                        conn.connect(sock)
                        break
                    except OSError:
                        conn.close()
                        if daemon.poll() is not None or time.time() > deadline:
                            raise SystemExit("the daemon did not start under valgrind")
                        time.sleep(0.1)
                reader = conn.makefile("rb")
                next_id = [0]

                def call(method, params):
                    next_id[0] += 1
                    line = {"jsonrpc": "2.0", "id": next_id[0], "method": method,
                            "params": params}
                    conn.sendall(json.dumps(line).encode() + b"\n")
                    answer = json.loads(reader.readline())
                    if "result" not in answer:
                        raise SystemExit(f"{method} failed: {answer}")

                call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
                for k in range(WARM_UP + writes):
                    call("fs/write_text_file", {"sessionId": "instr",
                                                "path": os.path.join(ws, f"f{k % WARM_UP}.txt"),
                                                "content": CONTENT})
                conn.close()
            finally:
                daemon.terminate()
                daemon.wait()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def annotate(out, inclusive=False):
    args = ["callgrind_annotate", "--auto=no"] + (["--inclusive=yes"] if inclusive else []) + [out]
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout


def total(out):
    m = re.search(r"([\d,]+) \(100\.0%\)\s+PROGRAM TOTALS", annotate(out))
    return int(m.group(1).replace(",", ""))


def sha_compress(out):
    """Instructions in SHA-256's compression function (its inlined parts
    are listed under several files; all are counted)."""
    count = 0
    for line in annotate(out).splitlines():
        m = re.match(r"\s*([\d,]+) \(.*?\)\s+\S+?:\S*compress256", line)
        if m:
            count += int(m.group(1).replace(",", ""))
    return count


def executed(out):
    """Instructions counted at each code address of a callgrind output
    written with `--dump-instr=yes`, and the object (binary or library)
    each address belongs to. The costs of `calls=` lines (a callee's
    inclusive cost, at the call site) are skipped."""
    cost, owner, names = {}, {}, {}
    obj, addr, skip_next = None, 0, False
    for raw in open(out):
        line = raw.rstrip("\n")
        if not line or line[0] == "#":
            continue
        m = re.match(r"(c?ob)=\((\d+)\)(?: (.*))?$", line)
        if m:
            if m.group(3):
                names[m.group(2)] = os.path.basename(m.group(3))
            if m.group(1) == "ob":
                obj = names.get(m.group(2))
            continue
        if line.startswith("calls="):
            skip_next = True
            continue
        first = line.split()[0]
        if first.startswith("0x"):
            addr = int(first, 16)
        elif first[0] in "+-" and first[1:].isdigit():
            addr += int(first) if first[0] == "+" else -int(first[1:])
        elif first != "*":
            continue  # another specification line (fn=, fl=, totals:, ...)
        if skip_next:
            skip_next = False
            continue
        parts = line.split()
        if len(parts) > 2:
            cost[addr] = cost.get(addr, 0) + int(parts[2])
            owner[addr] = obj
    return cost, owner


def footprint(short, long_, n):
    """The code every write runs: the addresses whose count grew by at
    least `n` (once per write on average) from the warm-up run to the run
    with `n` writes, as distinct 64-byte cache lines and 4 KiB pages, in
    all and per object. valgrind loads a program at the same addresses in
    both runs."""
    before, _ = executed(short)
    after, owner = executed(long_)
    hot = [a for a, c in after.items() if c - before.get(a, 0) >= n]
    lines = {a >> 6 for a in hot}
    pages = {a >> 12 for a in hot}
    per_object = {}
    for a in hot:
        per_object.setdefault(owner[a] or "?", set()).add(a >> 12)
    return len(lines), len(pages), {k: len(v) for k, v in per_object.items()}


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/writegate")
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 500
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    with tempfile.TemporaryDirectory() as tmp:
        short, long_ = os.path.join(tmp, "warm-up"), os.path.join(tmp, "writes")
        run(binary, 0, short)
        run(binary, n, long_)
        per_write = (total(long_) - total(short)) / n
        sha = (sha_compress(long_) - sha_compress(short)) / n
        print(f"binary: {binary}")
        print(f"user-space instructions per 1 KiB overwrite: {per_write:,.0f} "
              f"(over {n} writes, after {WARM_UP} warm-up writes)")
        print(f"  of which SHA-256's compression function (portable code here): {sha:,.0f}; "
              f"the rest: {per_write - sha:,.0f}")
        lines, pages, per_object = footprint(short, long_, n)
        objects = ", ".join(f"{k} {v}" for k, v in sorted(per_object.items(), key=lambda kv: -kv[1]))
        print(f"code run by every write (at least {n} times over {n} writes): "
              f"{lines:,} cache lines of 64 bytes ({lines * 64 / 1024:,.0f} KiB), "
              f"on {pages} pages of 4 KiB ({objects})")
        print()
        print("| writegate function (inclusive) | instructions per write |")
        print("|---|---|")
        seen = set()
        for line in annotate(long_, inclusive=True).splitlines():
            m = re.match(r"\s*([\d,]+) \(.*?\)\s+\S+?:(\S*writegate\S*) \[", line)
            if not m or m.group(2) in seen:
                continue
            seen.add(m.group(2))
            count = int(m.group(1).replace(",", "")) / n
            if count >= 2000:
                print(f"| `{m.group(2)[:90]}` | {count:,.0f} |")


if __name__ == "__main__":
    main()
