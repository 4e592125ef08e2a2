/**
 * The real tools that check the rendered network files: netplan's CLI (`netplan generate --root-dir`),
 * NetworkManager 1.42's `nmcli --offline`, ifupdown's `ifquery`/`ifup --no-act`, and isc-dhcp-client's
 * dhclient-script (which sources the dhclient hook).
 *
 * Why unpacked and not installed: netplan.io, network-manager and ifupdown enable services when installed
 * (systemd-networkd, NetworkManager, networking.service) and the test host's network must never change. So their
 * .debs (and the libraries and Python modules they need that the host lacks) are fetched with `apt-get download`,
 * unpacked with `dpkg-deb -x` into a cache dir, /var/cache/bootstate-test/tools/<package>_<version>, and run from
 * there:
 * - LD_LIBRARY_PATH for libnetplan0 and libnm0. Their soname links (libnetplan.so.0 → libnetplan.so.0.0) are made
 *   by ldconfig on installation, not shipped, so they are made here.
 * - netplan's CLI is Python: PYTHONPATH for its package (/usr/share/netplan) and the modules every subcommand's
 *   import pulls in (python3-netifaces, python3-dbus, python3-rich with pygments, markdown-it and mdurl);
 *   NETPLAN_GENERATE_PATH for its generator; and a small wrapper telling ctypes where libnetplan is, because
 *   ctypes.util.find_library asks ldconfig's cache, where an unpacked library never is. It runs under
 *   /usr/bin/python3 (Debian's, whose ABI the compiled modules were built for), not a python3 found on PATH.
 * Failing to fetch or unpack throws: the tests that need a tool fail, never skip.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const CACHE = process.getuid?.() === 0 ? '/var/cache/bootstate-test/tools' : join(tmpdir(), 'bootstate-test-tools');
const LIB = 'usr/lib/x86_64-linux-gnu';

/** The candidate version apt would install. */
function candidate(pkg: string): string {
  const out = execFileSync('apt-cache', ['show', '--no-all-versions', pkg], { encoding: 'utf8' });
  const version = /^Version: (.+)$/m.exec(out)?.[1];
  if (!version) throw new Error(`apt-cache knows no version of ${pkg}`);
  return version;
}

/** `packages` unpacked into one tree named after the first one and its version; reused once complete. */
export function unpacked(packages: string[]): string {
  const dir = join(CACHE, `${packages[0]}_${candidate(packages[0]!)}`.replace(/[^A-Za-z0-9._+-]/g, '_'));
  if (existsSync(join(dir, '.complete'))) return dir;
  mkdirSync(CACHE, { recursive: true });
  const work = mkdtempSync(join(CACHE, '.work-'));
  try {
    const debs = join(work, 'debs');
    const tree = join(work, 'tree');
    mkdirSync(debs);
    mkdirSync(tree);
    const got = spawnSync('apt-get', ['download', ...packages], { cwd: debs, encoding: 'utf8' });
    if (got.status !== 0) throw new Error(`apt-get download ${packages.join(' ')} failed: ${got.stderr}`);
    for (const deb of readdirSync(debs)) execFileSync('dpkg-deb', ['-x', join(debs, deb), tree]);
    writeFileSync(join(tree, '.complete'), `${packages.join(' ')}\n`);
    if (!existsSync(join(dir, '.complete'))) {
      rmSync(dir, { recursive: true, force: true });
      renameSync(tree, dir);
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return dir;
}

/** Makes the soname links ldconfig would have made for the shared libraries of a tree. */
function sonameLinks(dir: string): void {
  const lib = join(dir, LIB);
  for (const name of readdirSync(lib)) {
    const m = /^(lib[^.]+\.so\.\d+)\.[\d.]+$/.exec(name);
    if (m && !existsSync(join(lib, m[1]!))) symlinkSync(name, join(lib, m[1]!));
  }
}

export interface Tool {
  argv: string[];
  env: NodeJS.ProcessEnv;
}

const NETPLAN_WRAPPER = `import ctypes.util, os, sys
_find = ctypes.util.find_library
ctypes.util.find_library = lambda n: os.environ['BOOTSTATE_LIBNETPLAN'] if n == 'netplan' else _find(n)
sys.argv[0] = 'netplan'
from netplan import Netplan
Netplan().main()
`;

/** `netplan` (append the subcommand and its arguments to argv). */
export function netplanTool(): Tool {
  const dir = unpacked([
    'netplan.io', 'libnetplan0', 'python3-netifaces', 'python3-dbus', 'python3-rich', 'python3-pygments',
    'python3-markdown-it', 'python3-mdurl',
  ]);
  sonameLinks(dir);
  const wrapper = join(dir, 'netplan-wrapper.py');
  if (!existsSync(wrapper)) writeFileSync(wrapper, NETPLAN_WRAPPER);
  return {
    argv: ['/usr/bin/python3', wrapper],
    env: {
      ...process.env,
      PYTHONPATH: `${join(dir, 'usr/share/netplan')}:${join(dir, 'usr/lib/python3/dist-packages')}`,
      LD_LIBRARY_PATH: join(dir, LIB),
      NETPLAN_GENERATE_PATH: join(dir, 'usr/libexec/netplan/generate'),
      BOOTSTATE_LIBNETPLAN: join(dir, LIB, 'libnetplan.so.0'),
    },
  };
}

/** `nmcli` from network-manager 1.42 with libnm0 beside it. */
export function nmcliTool(): Tool {
  const dir = unpacked(['network-manager', 'libnm0']);
  sonameLinks(dir);
  return { argv: [join(dir, 'usr/bin/nmcli')], env: { ...process.env, LD_LIBRARY_PATH: join(dir, LIB) } };
}

/** ifupdown's programs: `ifquery`, `ifup`. */
export function ifupdownTool(program: 'ifquery' | 'ifup'): Tool {
  const dir = unpacked(['ifupdown']);
  return { argv: [join(dir, 'sbin', program)], env: { ...process.env } };
}

export function runTool(tool: Tool, args: string[], input?: string): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(tool.argv[0]!, [...tool.argv.slice(1), ...args], { env: tool.env, input, encoding: 'utf8' });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Debian's dhclient-script (isc-dhcp-client), the script that sources the dhclient enter hooks. */
export function dhclientScript(): string {
  return join(unpacked(['isc-dhcp-client']), 'sbin/dhclient-script');
}
