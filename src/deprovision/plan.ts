/**
 * What `bootstate deprovision` would change on the image at a root, found by reading it and changing nothing: the
 * list is printed for confirmation before any of it is applied (apply.ts). Paths are paths in the image; each is
 * resolved inside the root as chroot would when it is read or changed, so a link in the image never leads outside.
 */
import { lstat, readdir } from 'node:fs/promises';
import path from 'node:path';
import type { Config } from '../config/defaults.js';
import { WAAGENT_CUSTOM_DATA_PATH } from '../config/defaults.js';
import { PUBLISHED_FILE } from '../monitor/published-hostname.js';
import { findAdminUsers } from '../os/admin-users.js';
import { run } from '../os/exec.js';
import { findFirewall, type FirewallPiece } from '../os/firewall.js';
import { HOST_KEY_FILE } from '../os/host-keys.js';
import { isMarkerName } from '../os/marker.js';
import { readRegularInRoot, resolveInRoot } from '../os/paths.js';
import { UNIT_DIR, UNIT_MARK } from '../os/resource-disk/units.js';
import { shadowHash } from '../os/validate.js';

export type Change =
  /** A file (or, `recursive`, a directory) removed. */
  | { kind: 'remove'; path: string; what: string; recursive?: boolean }
  /** `/etc/machine-id` rewritten to `uninitialized`: the next boot is a first boot with an id of its own. */
  | { kind: 'machine-id'; path: string }
  /** root's password hash replaced by `*` in these shadow files (the file and the backup shadow-utils keeps). */
  | { kind: 'lock-root'; paths: string[] }
  /** A KVP pool file emptied in place, under its lock (other writers keep it open). */
  | { kind: 'empty-kvp'; path: string }
  /** `userdel -r`: the account, its home and mail spool. */
  | { kind: 'remove-user'; username: string; home: string | null }
  /** The running system's wireserver firewall rules (kernel state: only on `/`), as `bootstate firewall remove`. */
  | { kind: 'remove-firewall'; pieces: FirewallPiece[] };

export interface Plan {
  changes: Change[];
  /** What was found and deliberately left alone, e.g. an account bootstate did not create. */
  notes: string[];
}

/** The image's shadow file and the backup the shadow tools write next to it (it holds the previous hash). */
export const SHADOW_FILES = ['/etc/shadow', '/etc/shadow-'];
export const MACHINE_ID = '/etc/machine-id';

/** Where each DHCP client keeps its leases, and which names there are leases. */
export const LEASE_DIRS: ReadonlyArray<{ dir: string; client: string; match: RegExp }> = [
  { dir: '/run/systemd/netif/leases', client: 'systemd-networkd', match: /^[^.]/ },
  { dir: '/var/lib/NetworkManager', client: 'NetworkManager', match: /\.lease$/ },
  { dir: '/var/lib/dhcp', client: 'dhclient', match: /^dhclient.*\.leases?$/ },
  { dir: '/var/lib/dhclient', client: 'dhclient', match: /\.leases?$/ },
  { dir: '/var/lib/dhcpcd', client: 'dhcpcd', match: /\.lease6?$/ },
];

/** Shell histories, relative to a home directory. */
export const HISTORY_FILES = ['.bash_history', '.zsh_history', '.sh_history', '.ash_history', '.history', '.local/share/fish/fish_history'];

/** The KVP pools Hyper-V uses (`.kvp_pool_0` … `.kvp_pool_4`): the build VM's records in any of them must not ship. */
const KVP_POOLS = [0, 1, 2, 3, 4];

/** A root password field that holds no hash: already locked, or never set. */
const HASHLESS = /^(?:[!*]+|!?\*LOCK\*)$/;

/**
 * Everything `deprovision` would change on the image at `root` with this configuration; with `user`, also the
 * admin accounts bootstate created and their sudoers drop-ins.
 */
export async function planDeprovision(root: string, config: Config, options: { user: boolean }): Promise<Plan> {
  const changes: Change[] = [];
  const notes: string[] = [];
  const users = options.user ? await findAdminUsers(root, config.user_provisioners.sudoers_dir) : [];
  const removedHomes = new Set<string>();
  for (const user of users) {
    if (user.inPasswd && user.created && user.uid !== 0) {
      changes.push({ kind: 'remove-user', username: user.username, home: user.home });
      if (user.home) removedHomes.add(path.posix.normalize(user.home));
    } else if (user.inPasswd) {
      notes.push(`${user.username}: has a bootstate sudoers drop-in but was not created by bootstate (its /etc/passwd comment differs): account kept; remove it with userdel -r ${user.username} if it is the admin`);
    }
    for (const file of user.sudoers) changes.push({ kind: 'remove', path: file, what: `sudoers drop-in of ${user.username}` });
  }
  if (options.user && users.length === 0) notes.push('no account created by bootstate was found (no /etc/passwd entry with its comment, no 90-bootstate-* sudoers drop-in)');

  for (const file of await regularFilesIn(root, config.host_keys.dir, HOST_KEY_FILE)) changes.push({ kind: 'remove', path: file, what: 'ssh host key' });

  const machineId = await readRegularInRoot(root, MACHINE_ID);
  if (machineId !== null && !['', 'uninitialized'].includes(machineId.trim())) changes.push({ kind: 'machine-id', path: MACHINE_ID });

  for (const { dir, client, match } of LEASE_DIRS) {
    for (const file of await regularFilesIn(root, dir, match)) changes.push({ kind: 'remove', path: file, what: `DHCP lease of ${client}` });
  }

  const shadows: string[] = [];
  for (const file of SHADOW_FILES) if (rootHasPassword(await readRegularInRoot(root, file))) shadows.push(file);
  if (shadows.length > 0) changes.push({ kind: 'lock-root', paths: shadows });

  for (const home of await homes(root)) {
    if (removedHomes.has(home)) continue;
    for (const name of HISTORY_FILES) {
      const file = path.posix.join(home, name);
      if (await isRegular(root, file)) changes.push({ kind: 'remove', path: file, what: 'shell history' });
    }
  }

  changes.push(...(await bootstateState(root, config)));
  changes.push(...(await resourceDiskUnits(root)));
  if (root === '/') {
    const pieces = await findFirewall(run);
    if (pieces.length > 0) changes.push({ kind: 'remove-firewall', pieces });
  }
  return { changes, notes };
}

/**
 * The mount and swap units `bootstate resource-disk` wrote (they carry its mark): they name this VM's temporary disk,
 * and every boot of a VM made from the image writes its own.
 */
async function resourceDiskUnits(root: string): Promise<Change[]> {
  const changes: Change[] = [];
  for (const file of await regularFilesIn(root, UNIT_DIR, /\.(?:mount|swap)$/)) {
    if ((await readRegularInRoot(root, file))?.startsWith(UNIT_MARK)) changes.push({ kind: 'remove', path: file, what: 'temporary disk unit' });
  }
  return changes;
}

/** bootstate's own state, as `clean --logs` removes it, and the custom data it saved. */
async function bootstateState(root: string, config: Config): Promise<Change[]> {
  const changes: Change[] = [];
  const dataDir = config.data_dir.path;
  for (const name of (await namesIn(root, dataDir)).filter(isMarkerName)) changes.push({ kind: 'remove', path: path.posix.join(dataDir, name), what: 'provisioned marker' });
  const runs = path.posix.join(dataDir, 'runs');
  for (const name of await namesIn(root, runs)) changes.push({ kind: 'remove', path: path.posix.join(runs, name), what: 'run journal', recursive: true });
  // The build VM's name: a VM made from the image would otherwise publish its own name once more on its first cycle.
  const published = path.posix.join(dataDir, PUBLISHED_FILE);
  if (await isRegular(root, published)) changes.push({ kind: 'remove', path: published, what: 'last hostname published' });
  const saved = [config.custom_data.custom_data_path || path.posix.join(dataDir, 'CustomData'), config.custom_data.user_data_path || path.posix.join(dataDir, 'UserData')];
  if (config.custom_data.waagent_compat) saved.push(WAAGENT_CUSTOM_DATA_PATH);
  for (const file of saved) if (await isRegular(root, file)) changes.push({ kind: 'remove', path: file, what: 'saved custom data' });
  if (config.log_path.path && (await isRegular(root, config.log_path.path))) changes.push({ kind: 'remove', path: config.log_path.path, what: 'bootstate log' });
  for (const pool of KVP_POOLS) {
    const file = path.posix.join(config.telemetry.kvp_dir, `.kvp_pool_${pool}`);
    const info = await lstat(resolveInRoot(root, file, { followLast: false })).catch(() => null);
    if (info?.isFile() && info.size > 0) changes.push({ kind: 'empty-kvp', path: file });
  }
  return changes;
}

/** Whether the `root:` line of a shadow file holds a password hash (or an empty field, which logs in without one). */
export function rootHasPassword(shadow: string | null): boolean {
  const field = shadowHash(shadow, 'root');
  return field !== undefined && !HASHLESS.test(field);
}

/** Home directories whose histories are removed: root's, and every home the image's /etc/passwd names. */
async function homes(root: string): Promise<string[]> {
  const passwd = (await readRegularInRoot(root, '/etc/passwd')) ?? '';
  const found = new Set(['/root']);
  for (const line of passwd.split('\n')) {
    const home = line.split(':')[5];
    if (home?.startsWith('/') && path.posix.normalize(home) !== '/') found.add(path.posix.normalize(home));
  }
  return [...found].sort();
}

async function namesIn(root: string, dir: string): Promise<string[]> {
  return (await readdir(resolveInRoot(root, dir)).catch(() => [] as string[])).sort();
}

/** Regular files in `dir` whose names match: a link (e.g. a history linked to /dev/null on purpose) is left alone. */
async function regularFilesIn(root: string, dir: string, match: RegExp): Promise<string[]> {
  const files: string[] = [];
  for (const name of (await namesIn(root, dir)).filter((n) => match.test(n))) {
    const file = path.posix.join(dir, name);
    if (await isRegular(root, file)) files.push(file);
  }
  return files;
}

async function isRegular(root: string, file: string): Promise<boolean> {
  return (await lstat(resolveInRoot(root, file, { followLast: false })).catch(() => null))?.isFile() ?? false;
}
