#!/usr/bin/env python3
"""Prints, as one JSON line each, what the kernel's taskstats says of every process named COMM whose parent is PPID
when it exits: its peak RSS (hiwater_rss) and how long it ran. The kernel sends the figures as the
process exits, before its memory is released, so nothing is sampled and no cycle is missed; the exits of its other
threads are left out. Needs CAP_NET_ADMIN; runs until killed.

Usage: exit_rusage.py PPID COMM
"""
import json
import os
import socket
import struct
import sys

NETLINK_GENERIC = 16
GENL_ID_CTRL = 0x10
CTRL_CMD_GETFAMILY = 3
CTRL_ATTR_FAMILY_ID = 1
CTRL_ATTR_FAMILY_NAME = 2
TASKSTATS_CMD_GET = 1
TASKSTATS_CMD_ATTR_REGISTER_CPUMASK = 3
TASKSTATS_TYPE_PID = 1
TASKSTATS_TYPE_STATS = 3
TASKSTATS_TYPE_AGGR_PID = 4
# Offsets in struct taskstats (include/uapi/linux/taskstats.h); ac_tgid is there from version 12 of the structure.
OFF_COMM, OFF_PID, OFF_ETIME, OFF_HIWATER_RSS, OFF_TGID = 80, 128, 144, 200, 368
VERSION_WITH_TGID = 12


def attrs(data):
    i = 0
    while i + 4 <= len(data):
        length, kind = struct.unpack_from("HH", data, i)
        if length < 4:
            break
        yield kind & 0x3FFF, data[i + 4 : i + length]
        i += (length + 3) & ~3


def attr(kind, payload):
    return struct.pack("HH", 4 + len(payload), kind) + payload + b"\0" * ((-len(payload)) % 4)


def request(sock, family, cmd, payload):
    body = struct.pack("BBH", cmd, 1, 0) + payload
    sock.send(struct.pack("IHHII", 16 + len(body), family, 1, 0, 0) + body)  # NLM_F_REQUEST


def main():
    ppid, comm = int(sys.argv[1]), sys.argv[2].encode()
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_GENERIC)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.bind((0, 0))
    request(sock, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, attr(CTRL_ATTR_FAMILY_NAME, b"TASKSTATS\0"))
    reply = sock.recv(65536)
    family = next(struct.unpack_from("H", v)[0] for k, v in attrs(reply[20:]) if k == CTRL_ATTR_FAMILY_ID)
    cpus = f"0-{os.cpu_count() - 1}\0".encode()
    request(sock, family, TASKSTATS_CMD_GET, attr(TASKSTATS_CMD_ATTR_REGISTER_CPUMASK, cpus))
    print(json.dumps({"ready": True}), flush=True)
    while True:
        try:
            data = sock.recv(1 << 16)
        except OSError:  # ENOBUFS: the machine's other exits overran the buffer; said, not hidden.
            print(json.dumps({"overrun": True}), flush=True)
            continue
        offset = 0
        while offset + 16 <= len(data):
            length, kind = struct.unpack_from("IH", data, offset)
            if kind == family:
                for k, nested in attrs(data[offset + 20 : offset + length]):
                    if k != TASKSTATS_TYPE_AGGR_PID:
                        continue
                    fields = dict(attrs(nested))
                    stats = fields.get(TASKSTATS_TYPE_STATS)
                    if stats is None:
                        continue
                    (version,) = struct.unpack_from("H", stats)
                    if version < VERSION_WITH_TGID or len(stats) < OFF_TGID + 4:
                        sys.exit(f"taskstats version {version} has no ac_tgid: threads cannot be told from processes")
                    name = stats[OFF_COMM : OFF_COMM + 32].split(b"\0")[0]
                    pid, parent = struct.unpack_from("II", stats, OFF_PID)
                    (tgid,) = struct.unpack_from("I", stats, OFF_TGID)
                    # Threads are reported too, with the process's parent and often its name: only the main thread.
                    if parent != ppid or name != comm or pid != tgid:
                        continue
                    (elapsed,) = struct.unpack_from("Q", stats, OFF_ETIME)
                    (hiwater,) = struct.unpack_from("Q", stats, OFF_HIWATER_RSS)
                    print(json.dumps({"pid": pid, "elapsed_us": elapsed, "hiwater_rss_kib": hiwater}), flush=True)
            offset += (length + 3) & ~3


if __name__ == "__main__":
    main()
