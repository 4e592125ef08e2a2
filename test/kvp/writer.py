#!/usr/bin/env python3
"""Appends KVP records the way cloud-init does: open for append, flock(LOCK_EX), write, unlock, close.

usage: writer.py POOL COUNT TAG [BATCH]
Keys are `py|TAG|<i>`, values `value <i> of TAG é€` (multi-byte on purpose).
"""
import fcntl
import struct
import sys

KEY, VALUE = 512, 2048


def record(key, value):
    return struct.pack("%ds%ds" % (KEY, VALUE), key.encode("utf-8"), value.encode("utf-8"))


def main():
    path, count, tag = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    batch = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    for start in range(0, count, batch):
        data = b"".join(
            record("py|%s|%d" % (tag, i), "value %d of %s é€" % (i, tag))
            for i in range(start, min(count, start + batch))
        )
        with open(path, "ab") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.write(data)
            f.flush()
            fcntl.flock(f, fcntl.LOCK_UN)


if __name__ == "__main__":
    main()
