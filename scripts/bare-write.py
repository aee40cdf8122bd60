#!/usr/bin/env python3
"""The bare durable write, measured plainly: the yardstick the benches'
bare sides are checked against (docs/performance.md).

    scripts/bare-write.py DIR [SIZE_KIB] [WRITES]

In DIR (created if missing; use a directory on the disk the bench uses),
each write makes an exclusive 0600 temp file, writes SIZE_KIB KiB of text
lines in one write, fsyncs it, renames it over one of 64 files (replacing
the file of the same size written before) and fsyncs the directory. Prints
the median, lowest and highest milliseconds of one write, and the load
average. Nothing else runs in this process; nothing is asserted.
"""

import os
import statistics
import sys
import time


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    size = int(sys.argv[2]) * 1024 if len(sys.argv) > 2 else 5 * 1024 * 1024
    writes = int(sys.argv[3]) if len(sys.argv) > 3 else 64
    os.makedirs(d, exist_ok=True)
    line = b"bare line 0000000: the quick brown fox jumps over the lazy dog\n"
    content = (line * (size // len(line) + 1))[:size]
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)

    def write(k: int) -> float:
        tmp = os.path.join(d, f".bare.{os.getpid()}.{k}.tmp")
        target = os.path.join(d, f"file-{k % 64}.txt")
        t0 = time.perf_counter()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
        os.close(fd)
        os.rename(tmp, target)
        os.fsync(dfd)
        return (time.perf_counter() - t0) * 1000

    for k in range(64):  # every target exists at this size
        write(k)
    ms = [write(k) for k in range(writes)]
    print(
        f"bare durable write, {size // 1024} KiB, {writes} writes over 64 files in {d}: "
        f"median {statistics.median(ms):.3f} ms, lowest {min(ms):.3f}, highest {max(ms):.3f}"
    )
    print("load average:", open("/proc/loadavg").read().strip())
    for k in range(64):
        os.unlink(os.path.join(d, f"file-{k}.txt"))
    os.close(dfd)


if __name__ == "__main__":
    main()
