#!/usr/bin/env python3
"""Reads a KVP pool the way cloud-init does (flock, 2,560-byte reads, UTF-8, NULs stripped); prints JSON [[key, value], ...].

usage: reader.py POOL
"""
import fcntl
import json
import sys

KEY, RECORD = 512, 2560


def main():
    out = []
    with open(sys.argv[1], "rb") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        while True:
            data = f.read(RECORD)
            if len(data) < RECORD:
                break
            out.append([data[:KEY].decode("utf-8").strip("\x00"), data[KEY:].decode("utf-8").strip("\x00")])
        fcntl.flock(f, fcntl.LOCK_UN)
    json.dump(out, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
