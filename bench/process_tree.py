#!/usr/bin/env python3
"""Runs a command and writes what its whole process tree cost as one JSON object (bench/time-to-ready-sandbox.ts).

The wrapper makes itself the child subreaper (prctl PR_SET_CHILD_SUBREAPER), so a descendant the command leaves
behind is reparented to it rather than to init, and it waits for every process of the tree. Then
getrusage(RUSAGE_CHILDREN) holds the user and system CPU time of every process in the tree (the command and all it
ran) and, as ru_maxrss, the peak resident set of the largest one. The wrapper's own start and CPU are not in it.
Times are CLOCK_MONOTONIC in nanoseconds (Node's process.hrtime.bigint() reads the same clock): `start` just
before the fork, `exit` when the command itself exited, `end` when the last process of its tree had.

Usage: python3 bench/process_tree.py OUT.json COMMAND [ARG...]
"""
import ctypes
import json
import os
import resource
import sys
import time

PR_SET_CHILD_SUBREAPER = 36

out, argv = sys.argv[1], sys.argv[2:]
if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
    sys.exit(f"process_tree.py: prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(ctypes.get_errno())}")

start = time.monotonic_ns()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(argv[0], argv)
    finally:
        os._exit(127)

code = exited = None
while True:
    try:
        reaped, status = os.wait()
    except ChildProcessError:
        break
    if reaped == pid:
        exited = time.monotonic_ns()
        code = os.waitstatus_to_exitcode(status)
end = time.monotonic_ns()

usage = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(out, "w") as f:
    json.dump(
        {
            "start": start,
            "exit": exited,
            "end": end,
            "user_ms": usage.ru_utime * 1000,
            "sys_ms": usage.ru_stime * 1000,
            "maxrss_kib": usage.ru_maxrss,
            "exit_code": code,
        },
        f,
    )
sys.exit(code if code is not None and code >= 0 else 128 - (code or 0))
