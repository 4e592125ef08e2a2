#!/usr/bin/env bash
# Runs .ci/run the way CI does, on a machine as fresh as this one can make: a fresh clone of this checkout's HEAD
# inside a new minimal Debian root (mmdebstrap --variant=minbase) that has only ca-certificates, git, and this
# machine's node and npm. Everything else the suite needs (openssh, chromium, fonts, gcc, libc headers, systemd,
# mmdebstrap, …) must be installed by npm test's pretest step from scripts/test-packages.txt, as on a new CI machine.
#
# The root shares this machine's kernel and network (apt and the npm registry); it gets its own mount namespace
# with /proc, /sys, /dev and tmpfs /tmp and /run, so namespaces, loop devices and systemd-nspawn work inside it as
# they do on the host. Every agent run inside stays in the namespaces the tests create, as on the host.
#
# Usage (root): scripts/ci-in-fresh-root.sh [--keep] [--log FILE] [--cmd 'COMMAND']     Exit status is .ci/run's
# (or COMMAND's, run in the clone instead of .ci/run, e.g. to look into one suite).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/fresh-root.sh
[ "$(id -u)" = 0 ] && [ "$(uname -s)" = Linux ] || { echo "ci-in-fresh-root: needs root on Linux" >&2; exit 1; }
command -v mmdebstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null; }

keep=0 log= cmd=.ci/run
while [ $# -gt 0 ]; do
  case "$1" in
    --keep) keep=1 ;;
    --log) log=$2; shift ;;
    --cmd) cmd=$2; shift ;;
    *) echo "ci-in-fresh-root: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

SUITE=${FRESH_SUITE:-$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")}
work=$(mktemp -d /var/tmp/bootstate-ci-XXXXXX)
root="$work/root"
cleanup() { [ "$keep" = 1 ] && { echo "ci-in-fresh-root: root kept at $root" >&2; return; }; rm -rf --one-file-system "$work"; }
trap cleanup EXIT
[ -n "$log" ] || log="$work/ci.log"

echo "ci-in-fresh-root: minimal Debian $SUITE in $root" >&2
mmdebstrap --quiet --variant=minbase --include=ca-certificates,git "$SUITE" "$root"

fresh_root_node "$root"
git clone --quiet --no-local "$PWD" "$root/src/bootstate"
echo "ci-in-fresh-root: clone of $(git rev-parse --short HEAD); .ci/run's output goes to $log" >&2

set +e
unshare --mount --fork -- sh -c '
  root=$1 extra_ca=$2 cmd=$3
  mount --make-rprivate /
  mount --bind "$root" "$root"
  mount -t proc proc "$root/proc"
  mount --rbind /sys "$root/sys"
  mount --rbind /dev "$root/dev"
  mount -t tmpfs tmpfs "$root/tmp"
  mount -t tmpfs tmpfs "$root/run"
  # pivot_root, not chroot: the root must be the root of its mount tree, as on a machine. Under a chroot, entering a
  # container'"'"'s namespaces with nsenter lands in the host'"'"'s tree instead, and every booted test times out.
  cd "$root" && mkdir -p .host && pivot_root . .host && cd / && umount -l /.host && rmdir /.host
  exec /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    LANG=C.UTF-8 ${extra_ca:+NODE_EXTRA_CA_CERTS=$extra_ca} sh -c "cd /src/bootstate && $cmd"
' ci-in-fresh-root "$root" "${NODE_EXTRA_CA_CERTS:-}" "$cmd" >"$log" 2>&1
code=$?
set -e
tail -n 30 "$log"
echo "ci-in-fresh-root: $cmd exited $code" >&2
exit "$code"
