#!/usr/bin/env python3
"""The minimal straight-line agent bootstate is measured against (bench/time-to-ready-sandbox.ts).

One IMDS GET, useradd, passwd -l, the SSH keys, an sshd drop-in, the hostname, one Ready POST, exit — in that
order, with no retries, no validation, no markers, no locks, no telemetry and no error handling: the least a
first boot can do. Standard library only.

Usage: python3 bench/minimal_agent.py IMDS_URL HEALTH_URL
"""
import json
import os
import pwd
import subprocess
import sys
import urllib.request

imds_url, health_url = sys.argv[1:3]

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

body = json.dumps({"state": "Ready"}).encode()
request = urllib.request.Request(health_url, data=body, method="POST", headers={"content-type": "application/json"})
with urllib.request.urlopen(request, timeout=30) as response:
    response.read()
