/**
 * A build VM's tree as deprovision finds it, prepared in a temp dir: what it must remove, and next to each of those
 * something it must leave alone; and a snapshot of a whole tree (type, mode, owner, content or link target of
 * every entry) to diff before and after.
 */
import { createHash } from 'node:crypto';
import { chmodSync, chownSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { KvpStore } from '../../src/kvp/store.js';
import { UNIT_MARK } from '../../src/resource-disk/units.js';
import { HEADER as NETWORK_HEADER } from '../../src/os/network/common.js';

export const VM_ID = '4f6a1c2e-9d1b-4f7e-8a3c-2b5d6e7f8a90';
/** Thumbprints of the goal state's certificates: bootstate placed the first (its record names it), WALinuxAgent the second. */
export const PLACED = 'A1'.repeat(20);
export const WAAGENTS = 'B2'.repeat(20);

/** Paths (in the image) deprovision removes without `--user`. */
export const REMOVED = [
  '/etc/ssh/ssh_host_rsa_key',
  '/etc/ssh/ssh_host_rsa_key.pub',
  '/etc/ssh/ssh_host_ecdsa_key',
  '/etc/ssh/ssh_host_ecdsa_key.pub',
  '/etc/ssh/ssh_host_ed25519_key',
  '/etc/ssh/ssh_host_ed25519_key.pub',
  '/run/systemd/netif/leases/2',
  '/var/lib/NetworkManager/internal-6c4b5e2a-eth0.lease',
  '/var/lib/NetworkManager/dhclient-6c4b5e2a-eth0.lease',
  '/var/lib/dhcp/dhclient.eth0.leases',
  '/var/lib/dhclient/dhclient--eth0.lease',
  '/root/.bash_history',
  '/home/alice/.bash_history',
  '/home/bob/.bash_history',
  '/home/bob/.zsh_history',
  `/var/lib/bootstate/${VM_ID}.provisioned`,
  `/var/lib/bootstate/runs/2025-01-01T00-00-00.000Z-${VM_ID}.jsonl`,
  '/var/lib/bootstate/CustomData',
  '/var/lib/bootstate/published-hostname',
  '/var/log/bootstate.log',
  '/etc/systemd/system/mnt.mount',
  '/etc/systemd/system/mnt-swapfile.swap',
  `/var/lib/waagent/${PLACED}.crt`,
  `/var/lib/waagent/${PLACED}.prv`,
  `/var/lib/waagent/.${PLACED}.prv.0123456789ab.tmp`,
  '/var/lib/bootstate/waagent-certificates',
  '/var/lib/bootstate/.UserData.0123456789ab.tmp',
  '/run/bootstate/monitor-state.json',
  '/run/bootstate/firewall.nft',
  '/run/bootstate-transport-Ab12Cd',
  '/etc/ssh/.bootstate-new-ssh_host_rsa_key',
  '/etc/ssh/.bootstate-new-ssh_host_rsa_key.pub',
  '/etc/systemd/network/10-bootstate-eth1.network',
  '/etc/network/interfaces.d/bootstate-eth1',
];

/** Paths whose content deprovision changes without `--user` (each keeps its mode and owner). */
export const CHANGED = ['/etc/hostname', '/etc/machine-id', '/etc/shadow', '/var/lib/hyperv/.kvp_pool_1', '/var/lib/hyperv/.kvp_pool_3'];

/** What `--waagent-state` removes on top: everything in WALinuxAgent's directories (they stay) and its logs. */
export const REMOVED_WITH_WAAGENT_STATE = [
  `/var/lib/waagent/${WAAGENTS}.crt`,
  `/var/lib/waagent/${WAAGENTS}.prv`,
  '/var/lib/waagent/GoalState.1.xml',
  '/var/lib/waagent/Microsoft.Azure.Extensions.CustomScript-2.1.10',
  '/var/log/azure/custom-script',
  '/var/log/waagent.log',
  '/var/log/waagent.log.1.gz',
];

/** What `--user` removes on top: the account bootstate created, its home and its sudoers drop-in. */
export const REMOVED_WITH_USER = ['/home/alice', '/etc/sudoers.d/90-bootstate-alice'];

/** Account files `userdel` rewrites (and the backups and lock file it leaves next to them). */
export const USERDEL_FILES = ['/etc/passwd', '/etc/shadow', '/etc/group', '/etc/gshadow', '/etc/passwd-', '/etc/shadow-', '/etc/group-', '/etc/gshadow-', '/etc/.pwd.lock', '/etc/subuid', '/etc/subgid'];

export const ROOT_HASH = '$6$rounds=5000$saltsalt$0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789ab';

function put(root: string, p: string, text: string, mode = 0o644, owner: [number, number] = [0, 0]): void {
  const file = path.join(root, p);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, text);
  chmodSync(file, mode);
  if (process.getuid?.() === 0) chownSync(file, ...owner);
}

/**
 * Fills `root` with a provisioned build VM: alice made by bootstate (its comment, a sudoers drop-in, keys), bob an
 * account of the image's own. `outside` is a directory on the host a link in the image names, holding a lease that
 * must survive.
 */
export function prepareImage(root: string, outside: string): void {
  const alice: [number, number] = [1000, 1000];
  const bob: [number, number] = [1001, 1001];
  put(root, '/etc/passwd', 'root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\nalice:x:1000:1000:created by bootstate from provisioning metadata:/home/alice:/bin/bash\nbob:x:1001:1001:Bob:/home/bob:/bin/bash\n');
  put(root, '/etc/shadow', `root:${ROOT_HASH}:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\nalice:!:19000:0:99999:7:::\nbob:!:19000:0:99999:7:::\n`, 0o640);
  put(root, '/etc/group', 'root:x:0:\nsudo:x:27:alice\nalice:x:1000:\nbob:x:1001:\n');
  put(root, '/etc/gshadow', 'root:*::\nsudo:*::alice\nalice:!::\nbob:!::\n', 0o640);
  put(root, '/etc/machine-id', '0123456789abcdef0123456789abcdef\n', 0o444);
  for (const type of ['rsa', 'ecdsa', 'ed25519']) {
    put(root, `/etc/ssh/ssh_host_${type}_key`, `-----BEGIN OPENSSH PRIVATE KEY-----\n${type}\n-----END OPENSSH PRIVATE KEY-----\n`, 0o600);
    put(root, `/etc/ssh/ssh_host_${type}_key.pub`, `ssh-${type} AAAA root@build\n`);
  }
  put(root, '/etc/ssh/sshd_config', 'Include /etc/ssh/sshd_config.d/*.conf\n');
  put(root, '/etc/ssh/moduli', '# moduli\n');
  put(root, '/etc/sudoers', '@includedir /etc/sudoers.d\n', 0o440);
  put(root, '/etc/sudoers.d/90-bootstate-alice', '# Written by bootstate\n"alice" ALL=(ALL) NOPASSWD: ALL\n', 0o440);
  put(root, '/etc/sudoers.d/README', 'kept\n', 0o440);
  put(root, '/etc/hostname', 'build\n');
  put(root, '/usr/sbin/hv_kvp_daemon', '', 0o755);
  put(root, '/root/.bash_history', 'passwd\n', 0o600);
  put(root, '/root/.profile', 'kept\n');
  symlinkSync('/dev/null', path.join(root, 'root/.zsh_history'));
  put(root, '/home/alice/.bash_history', 'sudo -i\n', 0o600, alice);
  put(root, '/home/alice/.ssh/authorized_keys', 'ssh-ed25519 AAAA alice@laptop\n', 0o600, alice);
  put(root, '/home/bob/.bash_history', 'ls\n', 0o600, bob);
  put(root, '/home/bob/.zsh_history', ': 1:0;ls\n', 0o600, bob);
  put(root, '/home/bob/.bashrc', 'kept\n', 0o644, bob);
  if (process.getuid?.() === 0) {
    for (const [dir, owner] of [['home/alice', alice], ['home/alice/.ssh', alice], ['home/bob', bob]] as const) chownSync(path.join(root, dir), ...owner);
  }
  put(root, '/run/systemd/netif/leases/2', 'ADDRESS=10.0.0.4\n');
  put(root, '/var/lib/NetworkManager/internal-6c4b5e2a-eth0.lease', 'ADDRESS=10.0.0.4\n');
  put(root, '/var/lib/NetworkManager/dhclient-6c4b5e2a-eth0.lease', 'lease {}\n');
  put(root, '/var/lib/NetworkManager/NetworkManager.state', '[main]\n');
  put(root, '/var/lib/dhcp/dhclient.eth0.leases', 'lease {}\n');
  put(root, '/var/lib/dhclient/dhclient--eth0.lease', 'lease {}\n');
  // An absolute link in the image: inside the root it names <root><outside>, which does not exist.
  symlinkSync(outside, path.join(root, 'var/lib/dhcpcd'));
  writeFileSync(path.join(outside, 'eth0.lease'), 'host lease\n');
  put(root, `/var/lib/bootstate/${VM_ID}.provisioned`, '', 0o600);
  put(root, `/var/lib/bootstate/runs/2025-01-01T00-00-00.000Z-${VM_ID}.jsonl`, '{"t":0}\n', 0o600);
  put(root, '/var/lib/bootstate/CustomData', 'secret custom data\n', 0o600);
  put(root, '/var/lib/bootstate/published-hostname', 'build-vm\n', 0o644);
  put(root, '/var/lib/bootstate/bootstate.lock', '', 0o600);
  put(root, '/var/log/bootstate.log', '{"msg":"provisioned"}\n', 0o640);
  put(root, '/var/log/syslog', 'kept\n', 0o640);
  put(root, '/etc/systemd/system/mnt.mount', `${UNIT_MARK}; bootstate-resource-disk.service rewrites and starts it on each boot.\n[Mount]\nWhat=/dev/sdb1\nWhere=/mnt\n`);
  put(root, '/etc/systemd/system/mnt-swapfile.swap', `${UNIT_MARK}; bootstate-resource-disk.service rewrites and starts it on each boot.\n[Swap]\nWhat=/mnt/swapfile\n`);
  // The network the build VM's IMDS described (two stacks: the image may have changed), and look-alikes kept: the
  // image's own file, and one with bootstate's name but not its header.
  const rendered = `${NETWORK_HEADER.join('\n')}\n`;
  put(root, '/etc/systemd/network/10-bootstate-eth1.network', `${rendered}[Match]\nMACAddress=00:0d:3a:00:00:02\n`);
  put(root, '/etc/network/interfaces.d/bootstate-eth1', `${rendered}allow-hotplug eth1\niface eth1 inet dhcp\n`);
  put(root, '/etc/systemd/network/10-bootstate-eth2.network', '# mine, not bootstate\'s\n[Match]\nName=eth2\n');
  put(root, '/etc/systemd/network/80-eth0.network', '[Match]\nName=eth0\n[Network]\nDHCP=yes\n');
  mkdirSync(path.join(root, 'etc/systemd/system/multi-user.target.wants'), { recursive: true });
  symlinkSync('/lib/systemd/system/systemd-networkd.service', path.join(root, 'etc/systemd/system/multi-user.target.wants/systemd-networkd.service'));
  // The image's own mount unit: kept.
  put(root, '/etc/systemd/system/data.mount', '[Mount]\nWhat=/dev/disk/azure/scsi1/lun0-part1\nWhere=/data\n');
  // /var/lib/waagent: one certificate bootstate placed (its record names it, and a write a crash cut short), one
  // WALinuxAgent's, and WALinuxAgent's own state; its extension logs and log in /var/log.
  put(root, '/var/lib/bootstate/waagent-certificates', `# Files bootstate placed\n${PLACED}.crt\n${PLACED}.prv\n../../etc/passwd\n`, 0o600);
  put(root, `/var/lib/waagent/${PLACED}.crt`, '-----BEGIN CERTIFICATE-----\nplaced\n-----END CERTIFICATE-----\n');
  put(root, `/var/lib/waagent/${PLACED}.prv`, '-----BEGIN PRIVATE KEY-----\nplaced\n-----END PRIVATE KEY-----\n', 0o600);
  put(root, `/var/lib/waagent/.${PLACED}.prv.0123456789ab.tmp`, '-----BEGIN PRIVATE KEY-----\nhalf', 0o600);
  put(root, `/var/lib/waagent/${WAAGENTS}.crt`, '-----BEGIN CERTIFICATE-----\nwaagent\n-----END CERTIFICATE-----\n');
  put(root, `/var/lib/waagent/${WAAGENTS}.prv`, '-----BEGIN PRIVATE KEY-----\nwaagent\n-----END PRIVATE KEY-----\n', 0o600);
  put(root, '/var/lib/waagent/GoalState.1.xml', '<GoalState/>\n');
  put(root, '/var/lib/waagent/Microsoft.Azure.Extensions.CustomScript-2.1.10/config/0.settings', '{}\n', 0o600);
  chmodSync(path.join(root, 'var/lib/waagent'), 0o700);
  put(root, '/var/log/azure/custom-script/handler.log', 'ran\n');
  put(root, '/var/log/waagent.log', 'hostname build-vm\n');
  put(root, '/var/log/waagent.log.1.gz', 'old\n');
  put(root, '/usr/sbin/waagent', '', 0o755);
  put(root, '/var/lib/bootstate/.UserData.0123456789ab.tmp', 'half of the user data', 0o600);
  put(root, '/run/bootstate/monitor-state.json', '{"format":1}\n', 0o600);
  put(root, '/run/bootstate/firewall.nft', 'table inet bootstate {}\n', 0o600);
  put(root, '/run/bootstate-transport-Ab12Cd/transport.key', '-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----\n', 0o600);
  put(root, '/etc/ssh/.bootstate-new-ssh_host_rsa_key', '-----BEGIN OPENSSH PRIVATE KEY-----\nnew\n-----END OPENSSH PRIVATE KEY-----\n', 0o600);
  put(root, '/etc/ssh/.bootstate-new-ssh_host_rsa_key.pub', 'ssh-rsa AAAA new\n');
  // The image's own: kept.
  put(root, '/run/bootstate-transport-notes', 'not a directory of bootstate\'s\n');
  symlinkSync('/etc', path.join(root, 'run/bootstate-transport-Zz99Yy'));
  put(root, '/etc/ssh/.hidden_key', 'the image\'s\n', 0o600);
  mkdirSync(path.join(root, 'var/lib/hyperv'), { recursive: true });
  new KvpStore({ path: path.join(root, 'var/lib/hyperv/.kvp_pool_1') }).append([{ key: 'bootstate-provisioned', value: VM_ID }]);
  new KvpStore({ path: path.join(root, 'var/lib/hyperv/.kvp_pool_3') }).append([{ key: 'VirtualMachineName', value: 'build' }]);
  new KvpStore({ path: path.join(root, 'var/lib/hyperv/.kvp_pool_0') }).clear();
}

export interface Entry {
  type: 'file' | 'dir' | 'link' | 'other';
  mode: string;
  owner: string;
  /** sha256 of a file, target of a link. */
  content?: string;
}

/** Every entry under `root` (links not followed), keyed by its path in the image. */
export function snapshot(root: string): Map<string, Entry> {
  const entries = new Map<string, Entry>();
  const walk = (p: string) => {
    const info = lstatSync(path.join(root, p));
    const base = { mode: (info.mode & 0o7777).toString(8), owner: `${info.uid}:${info.gid}` };
    if (info.isSymbolicLink()) entries.set(p, { type: 'link', ...base, content: readlinkSync(path.join(root, p)) });
    else if (info.isFile()) entries.set(p, { type: 'file', ...base, content: createHash('sha256').update(readFileSync(path.join(root, p))).digest('hex') });
    else if (info.isDirectory()) {
      entries.set(p, { type: 'dir', ...base });
      for (const name of readdirSync(path.join(root, p)).sort()) walk(path.posix.join(p, name));
    } else entries.set(p, { type: 'other', ...base });
  };
  walk('/');
  return entries;
}

/** What differs between two snapshots: paths gone, paths that appeared, paths whose entry changed. */
export function diff(before: Map<string, Entry>, after: Map<string, Entry>): { removed: string[]; added: string[]; changed: string[] } {
  const removed = [...before.keys()].filter((p) => !after.has(p)).sort();
  const added = [...after.keys()].filter((p) => !before.has(p)).sort();
  const changed = [...before.keys()].filter((p) => after.has(p) && JSON.stringify(before.get(p)) !== JSON.stringify(after.get(p))).sort();
  return { removed, added, changed };
}

/** `REMOVED` with everything under a removed directory. */
export function under(paths: string[], tree: Map<string, Entry>): string[] {
  return [...tree.keys()].filter((p) => paths.some((r) => p === r || p.startsWith(`${r}/`))).sort();
}
