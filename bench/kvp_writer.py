#!/usr/bin/env python3
"""Benchmark peer: writes COUNT telemetry events to POOL the way cloud-init's KVP handler does when it locks per
event: open for append, flock(LOCK_EX), write one record, unlock, close. Prints {"loop_ms": …} as JSON.

usage: kvp_writer.py POOL COUNT
"""
import fcntl
import json
import struct
import sys
import time
import uuid

KEY, VALUE = 512, 2048


def main():
    path, count = sys.argv[1], int(sys.argv[2])
    started = time.perf_counter()
    for i in range(count):
        key = "CLOUD_INIT|1754937941|diagnostic|bench/event|00000000-0000-0000-0000-000000000000|%s" % uuid.uuid4()
        value = json.dumps({"name": "bench/event", "type": "diagnostic", "ts": "2025-08-11T18:45:41.123456+00:00",
                            "msg": "event %d of the benchmark" % i}, separators=(",", ":"))
        data = struct.pack("%ds%ds" % (KEY, VALUE), key.encode("utf-8"), value.encode("utf-8"))
        with open(path, "ab") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.write(data)
            f.flush()
            fcntl.flock(f, fcntl.LOCK_UN)
    json.dump({"loop_ms": (time.perf_counter() - started) * 1000}, sys.stdout)


if __name__ == "__main__":
    main()
