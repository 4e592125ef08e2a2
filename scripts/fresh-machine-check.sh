#!/usr/bin/env bash
# Proves the README's two commands work on a fresh Debian machine with nothing but Node and npm on it.
#
# Builds a minimal Debian root (mmdebstrap --variant=minbase), copies this machine's node and npm and the
# project's tracked files into it, then inside it, as root, with the host's network:
#   1. npm ci && npm start                  (the first README command, unchanged)
#   2. npm test's pretest step as a non-root user: must stop (exit 1) naming the one apt-get command to run
#   3. npm test's pretest step as root: must install every package of scripts/test-packages.txt without starting
#      a service, after which every proving command is found and the step is silent.
# The suite itself is not run a second time here: it already runs on the CI machine, and what differs on a fresh
# machine is exactly what step 3 proves (the tools are present). Takes a few minutes, mostly downloads.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/fresh-root.sh
[ "$(id -u)" = 0 ] || { echo "fresh-machine-check: needs root (mmdebstrap, chroot)" >&2; exit 1; }
command -v mmdebstrap >/dev/null || { echo "fresh-machine-check: needs mmdebstrap (apt-get install mmdebstrap)" >&2; exit 1; }

SUITE=${FRESH_SUITE:-$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")}
work=$(mktemp -d /tmp/bootstate-fresh-XXXXXX)
root="$work/root"
cleanup() { rm -rf --one-file-system "$work"; }
trap cleanup EXIT

step() { printf '\n== fresh-machine-check: %s\n' "$*"; }

step "minimal Debian $SUITE root in $root"
mmdebstrap --quiet --variant=minbase --include=ca-certificates "$SUITE" "$root"

step "Node $(node --version) and npm from this machine; the project's tracked files"
fresh_root_node "$root"
mkdir -p "$root/src/bootstate"
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$root/src/bootstate"
chroot "$root" useradd -m builder
chroot "$root" chown -R builder: /src/bootstate

# A private mount namespace so /proc and /dev inside the root vanish with it.
inside() {
  unshare --mount --fork -- sh -c '
    root=$1; shift
    mount --make-rprivate /
    mount --bind "$root" "$root"    # a mount point as / inside, as on a real machine (unshare -m needs one)
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mount -t tmpfs tmpfs "$root/tmp"
    exec chroot "$root" "$@"
  ' inside "$root" "$@"
}

step "npm ci && npm start (as a user, as the README says)"
inside su builder -w NODE_EXTRA_CA_CERTS -c 'cd /src/bootstate && npm ci --no-audit --no-fund && npm start' >"$work/start.log" 2>&1 || { tail -n 40 "$work/start.log"; echo "FAIL: npm ci && npm start" >&2; exit 1; }
tail -n 25 "$work/start.log"

step "pretest as a non-root user stops with the one command to run"
set +e
out=$(inside su builder -w NODE_EXTRA_CA_CERTS -c 'cd /src/bootstate && node scripts/test-prerequisites.mjs' 2>&1)
code=$?
set -e
printf '%s\n' "$out"
[ "$code" = 1 ] || { echo "FAIL: expected exit 1 as non-root, got $code" >&2; exit 1; }
grep -q "apt-get install -y --no-install-recommends" <<<"$out" || { echo "FAIL: no install command printed" >&2; exit 1; }

step "pretest as root installs the packages the suite needs"
inside sh -c 'cd /src/bootstate && node scripts/test-prerequisites.mjs'
[ ! -e "$root/usr/sbin/policy-rc.d" ] || { echo "FAIL: policy-rc.d left behind" >&2; exit 1; }
missing=0
while read -r cmd pkg; do
  case "$cmd" in ''|'#'*) continue ;; esac
  if inside sh -c "command -v $cmd >/dev/null || [ -x /usr/sbin/$cmd ] || [ -x /sbin/$cmd ] || { case $cmd in /*) [ -e $cmd ] ;; *) false ;; esac; }"; then
    echo "  ok  $cmd ($pkg)"
  else
    echo "  MISSING  $cmd ($pkg)"; missing=1
  fi
done < scripts/test-packages.txt
[ "$missing" = 0 ] || { echo "FAIL: packages missing after pretest" >&2; exit 1; }
again=$(inside sh -c 'cd /src/bootstate && node scripts/test-prerequisites.mjs' 2>&1)
[ -z "$again" ] || { echo "FAIL: second pretest run was not silent: $again" >&2; exit 1; }
[ ! -e "$root/run/sshd.pid" ] || { echo "FAIL: installing openssh-server started sshd" >&2; exit 1; }

step "passed: npm ci && npm start work, and npm test's prerequisites install themselves"
