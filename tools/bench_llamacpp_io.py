#!/usr/bin/python3
"""bench_llamacpp_io.py OUT CMD... - run CMD, sample its /proc/PID/io read_bytes (all its threads) every
50 ms until it exits, then write "read_bytes wall_seconds" to OUT. Exits with CMD's status. Used by
tools/bench_llamacpp.sh to count the bytes each side reads from disk in the same way."""
import subprocess
import sys
import time


def read_bytes(pid):
    try:
        with open("/proc/%d/io" % pid) as f:
            for line in f:
                if line.startswith("read_bytes:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def main():
    out, cmd = sys.argv[1], sys.argv[2:]
    t0 = time.time()
    p = subprocess.Popen(cmd)
    last = 0
    while p.poll() is None:
        v = read_bytes(p.pid)
        if v is not None:
            last = v
        time.sleep(0.05)
    with open(out, "w") as f:
        f.write("%d %.3f\n" % (last, time.time() - t0))
    return p.returncode


if __name__ == "__main__":
    sys.exit(main())
