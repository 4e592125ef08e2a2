# Sourced by scripts/fresh-machine-check.sh and scripts/ci-in-fresh-root.sh: gives a new minimal Debian root what a
# fresh machine of ours starts with besides Debian itself.

# fresh_root_node ROOT: this machine's node and npm, its resolver, and its local CA when the network re-signs TLS
# (then NODE_EXTRA_CA_CERTS is exported for Node, which keeps its own CA list).
fresh_root_node() {
  local root=$1 node_bin npm_dir
  node_bin=$(readlink -f "$(command -v node)")
  npm_dir=$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")
  install -m 0755 "$node_bin" "$root/usr/bin/node"
  mkdir -p "$root/usr/lib/node_modules"
  cp -a "$npm_dir" "$root/usr/lib/node_modules/npm"
  ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/bin/npm"
  ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/bin/npx"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
    chroot "$root" update-ca-certificates >/dev/null 2>&1
    export NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
  fi
}
