#!/usr/bin/env python3
"""The minimal straight-line agent bootstate is measured against (bench/time-to-ready-sandbox.ts).

One IMDS GET, useradd, passwd -l, the SSH keys, an sshd drop-in, the hostname, new SSH host keys, one Ready POST,
exit — in that order, with no retries, no validation, no markers, no locks, no telemetry and no error handling: the
least a first boot can do. Standard library only.

The host keys are replaced as bootstate replaces them by default (`[host_keys]`): the image's `ssh_host_*_key` and
`.pub` in /etc/ssh are removed and `ssh-keygen -q -t TYPE -N '' -C root@HOSTNAME` makes one key of each of rsa,
ecdsa and ed25519 — here one after another, as a straight-line agent would (bootstate runs the three at once).
`--keep-host-keys` leaves them out, for the comparison with bootstate's `host_keys.regenerate = false`.

Usage: python3 bench/minimal_agent.py IMDS_URL HEALTH_URL [--keep-host-keys]
"""
import glob
import json
import os
import pwd
import subprocess
import sys
import urllib.request

imds_url, health_url = sys.argv[1:3]
replace_host_keys = "--keep-host-keys" not in sys.argv[3:]

with urllib.request.urlopen(urllib.request.Request(imds_url, headers={"Metadata": "true"}), timeout=30) as response:
    compute = json.load(response)["compute"]
profile = compute["osProfile"]
user = profile["adminUsername"]

subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", user], check=True)
subprocess.run(["passwd", "-l", user], check=True, stdout=subprocess.DEVNULL)

home = os.path.join("/home", user)
ssh = os.path.join(home, ".ssh")
os.makedirs(ssh, mode=0o700, exist_ok=True)
keys = os.path.join(ssh, "authorized_keys")
with open(keys, "w") as f:
    f.write("".join(key["keyData"].strip() + "\n" for key in compute.get("publicKeys", [])))
os.chmod(keys, 0o600)
account = pwd.getpwnam(user)
for path in (ssh, keys):
    os.chown(path, account.pw_uid, account.pw_gid)

password_logins = profile.get("disablePasswordAuthentication") in ("false", False)
with open("/etc/ssh/sshd_config.d/00-minimal.conf", "w") as f:
    f.write(f"PasswordAuthentication {'yes' if password_logins else 'no'}\n")

with open("/etc/hostname", "w") as f:
    f.write(profile["computerName"] + "\n")
subprocess.run(["hostname", profile["computerName"]], check=True)

if replace_host_keys:
    for path in glob.glob("/etc/ssh/ssh_host_*_key") + glob.glob("/etc/ssh/ssh_host_*_key.pub"):
        os.remove(path)
    for key_type in ("rsa", "ecdsa", "ed25519"):
        comment = "root@" + profile["computerName"]
        subprocess.run(["ssh-keygen", "-q", "-t", key_type, "-N", "", "-C", comment, "-f", f"/etc/ssh/ssh_host_{key_type}_key"], check=True)

body = json.dumps({"state": "Ready"}).encode()
request = urllib.request.Request(health_url, data=body, method="POST", headers={"content-type": "application/json"})
with urllib.request.urlopen(request, timeout=30) as response:
    response.read()
