#!/usr/bin/env python3
"""disk_rate.py FILE [SIZE_KIB] [DEPTH] [SECONDS] - the disk's read rate as k3's
reader sees it: DEPTH threads, each reading SIZE_KIB-sized O_DIRECT pieces at
random aligned offsets of FILE for SECONDS; prints GB/s (1e9 bytes).

The I/O floor of a streamed token is its bytes read over this rate, measured
in the same run as the token (tools/bench_llamacpp.sh, bench_peer_ladder.sh
print it). A measurement, not a test. Defaults: 4096 KiB, depth 4, 3 s.
"""
import mmap
import os
import random
import sys
import threading
import time

ALIGN = 4096


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    path = sys.argv[1]
    size = int(sys.argv[2]) * 1024 if len(sys.argv) > 2 else 4 << 20
    depth = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 3.0
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError as e:
        print("disk_rate: %s: %s" % (path, e.strerror), file=sys.stderr)
        return 1
    file_bytes = os.fstat(fd).st_size
    if size % ALIGN or size <= 0 or size > file_bytes:
        print("disk_rate: %s: read size %d must be a multiple of 4 KiB and fit the file" % (path, size),
              file=sys.stderr)
        return 1
    windows = (file_bytes - size) // ALIGN + 1
    done = [0] * depth
    stop = time.monotonic() + seconds

    def reader(i):
        buf = mmap.mmap(-1, size)          # page-aligned, as O_DIRECT wants
        rng = random.Random(i + 1)
        while time.monotonic() < stop:
            done[i] += os.preadv(fd, [buf], rng.randrange(windows) * ALIGN)

    t0 = time.monotonic()
    threads = [threading.Thread(target=reader, args=(i,)) for i in range(depth)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    os.close(fd)
    print("%.3f" % (sum(done) / elapsed / 1e9))
    return 0


if __name__ == "__main__":
    sys.exit(main())
