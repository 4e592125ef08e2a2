#!/usr/bin/env python3
"""Tries a non-blocking flock on POOL from a separate process; prints `locked` or `blocked <errno>`.

usage: lock-probe.py POOL ex|sh
"""
import fcntl
import sys

with open(sys.argv[1], "rb") as f:
    mode = fcntl.LOCK_EX if sys.argv[2] == "ex" else fcntl.LOCK_SH
    try:
        fcntl.flock(f, mode | fcntl.LOCK_NB)
        print("locked")
    except BlockingIOError as e:
        print("blocked %d" % e.errno)
