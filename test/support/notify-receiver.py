# A real receiver of sd_notify datagrams, as systemd's manager would read them: an AF_UNIX SOCK_DGRAM socket at the
# address given (a path, or "@name" for the abstract namespace) with SO_PASSCRED, so the kernel attaches the
# sender's credentials. Prints "listening", then one JSON line per datagram: {"pid", "uid", "data", "at", "wall"}
# (at: the receiver's CLOCK_MONOTONIC seconds; wall: seconds since the epoch). Runs until killed.
import json, os, socket, struct, sys, time

address = sys.argv[1]
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
sock.bind("\0" + address[1:] if address.startswith("@") else address)
if not address.startswith("@"):
    os.chmod(address, 0o777)
print("listening", flush=True)
creds_size = struct.calcsize("3i")
while True:
    data, ancillary, _flags, _addr = sock.recvmsg(65536, socket.CMSG_SPACE(creds_size))
    pid = uid = None
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
            pid, uid, _gid = struct.unpack("3i", payload[:creds_size])
    print(json.dumps({"pid": pid, "uid": uid, "data": data.decode("utf-8", "replace"), "at": time.monotonic(), "wall": time.time()}), flush=True)
