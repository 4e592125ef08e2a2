#!/bin/sh
# The plain program started from its V8 startup snapshot (bootstate.snapshot beside this file, built by
# scripts/build/snapshot.mjs) with the node that built it, @NODE@. A snapshot that cannot load never stops a run:
#   - the blob missing or unreadable, that node newer than the blob (upgraded since the build), or
#     BOOTSTATE_SNAPSHOT=off: the plain program (bootstate.cjs beside this file) runs at once, with no warning for
#     the last;
#   - the blob not as built (its `cksum` differs from the one the build wrote beside it, bootstate.snapshot.cksum):
#     V8 checks only its own heap's checksum, and a byte flipped in Node's part of the blob was seen to run the
#     program without a word (a realm value missing) or to abort node (std::bad_alloc): a warning, then the plain
#     program;
#   - node refusing the blob (exit 14: built by another Node or with other V8 flags) or dying while it deserializes
#     it (V8's checksum, SIGTRAP; Node's own checks, SIGABRT; a crash, SIGSEGV/SIGBUS): a warning, then the plain
#     program.
# node exits with 14 only before the program's first line (the program's own codes are 0, 1, 2 and 78), and a
# crash deserializing the heap comes before it too; a run of the program that itself crashed that way would run
# again, as after any crash, from its markers. This shell stays the parent of node (it must see how node ended),
# so the program's PID is not the launcher's: a unit of Type=notify would need NotifyAccess=all for it. The
# packaged units run the single executable instead (packaging/systemd/).
# Started through a link (/usr/bin/bootstate), its files are beside the file it links to.
self=$0
if [ -L "$self" ]; then self=$(readlink -f -- "$0") || self=$0; fi
here=${self%/*}
[ "$here" = "$self" ] && here=.
node=@NODE@
blob=$here/bootstate.snapshot
if [ "${BOOTSTATE_SNAPSHOT:-}" = off ]; then
  exec "$node" "$here/bootstate.cjs" "$@"
fi
if [ ! -r "$blob" ] || [ "$node" -nt "$blob" ]; then
  echo "bootstate: warning: no usable startup snapshot at $blob; running without it" >&2
  exec "$node" "$here/bootstate.cjs" "$@"
fi
if ! { read -r built < "$blob.cksum" && [ "$(cksum < "$blob")" = "$built" ]; } 2>/dev/null; then
  echo "bootstate: warning: the startup snapshot $blob is not as built (its cksum differs from $blob.cksum); running without it" >&2
  exec "$node" "$here/bootstate.cjs" "$@"
fi
"$node" --snapshot-blob "$blob" -- "$@"
code=$?
case $code in
  14 | 133 | 134 | 135 | 139)
    echo "bootstate: warning: the startup snapshot $blob did not load (exit $code); running without it" >&2
    exec "$node" "$here/bootstate.cjs" "$@"
    ;;
esac
exit $code
