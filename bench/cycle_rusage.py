"""Runs commands one after another, each in its own process, and prints one JSON line per run with what the kernel
accounted to it (os.wait4): user and system CPU in microseconds, peak RSS (ru_maxrss, KiB) and wall time. Used by
bench/monitor-cycles.ts, which needs each cycle's CPU to the microsecond (GNU time prints centiseconds).

    python3 bench/cycle_rusage.py ROUNDS NAME=CMD [NAME=CMD ...]     (CMD: a JSON array of argv)
"""
import json
import os
import subprocess
import sys
import time

rounds = int(sys.argv[1])
variants = [(spec.split("=", 1)[0], json.loads(spec.split("=", 1)[1])) for spec in sys.argv[2:]]
for index in range(rounds):
    # Rotating the order each round spreads drift in the machine's load over every variant alike.
    for offset in range(len(variants)):
        name, argv = variants[(index + offset) % len(variants)]
        started = time.monotonic()
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        stderr = child.stderr.read()
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.monotonic() - started
        code = os.waitstatus_to_exitcode(status)
        print(json.dumps({
            "name": name, "round": index, "code": code,
            "user_us": round(usage.ru_utime * 1e6), "sys_us": round(usage.ru_stime * 1e6),
            "maxrss_kib": usage.ru_maxrss, "wall_ms": wall * 1000,
            "stderr": stderr.decode("utf8", "replace")[-300:] if code != 0 else "",
        }), flush=True)
