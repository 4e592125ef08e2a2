/**
 * What `bootstate deprovision` would change on the image at a root, found by reading it and changing nothing: the
 * list is printed for confirmation before any of it is applied (apply.ts). Paths are paths in the image; each is
 * resolved inside the root as chroot would when it is read or changed, so a link in the image never leads outside.
 */
import path from 'node:path';
import type { Config } from '../config/defaults.js';
import { findAdminUsers } from '../os/user/admin-users.js';
import { run } from '../system/exec.js';
import { findFirewall } from '../firewall/firewall.js';
import { HOST_KEY_FILE } from '../os/ssh/host-keys.js';
import { readRegularInRoot } from '../system/paths.js';
import { shadowHash } from '../os/validate.js';
import { bootstateState } from './bootstate-state.js';
import type { Change, PlanPart } from './plan-types.js';
import { entryAt, isRegular, regularFilesIn } from './tree.js';
import { waagentChanges } from './waagent.js';

export type { Change } from './plan-types.js';

export type Plan = PlanPart;

export interface PlanOptions {
  /** Also the admin accounts bootstate created and their sudoers drop-ins. */
  user: boolean;
  /** Also WALinuxAgent's whole state, as `waagent -deprovision` removes it. */
  waagentState?: boolean;
}

/** The image's shadow file and the backup the shadow tools write next to it (it holds the previous hash). */
export const SHADOW_FILES = ['/etc/shadow', '/etc/shadow-'];
export const MACHINE_ID = '/etc/machine-id';
export const HOSTNAME_FILE = '/etc/hostname';
/** What `/etc/hostname` says after deprovision: no VM's name (WALinuxAgent writes `localhost.localdomain`). */
export const RESET_HOSTNAME = 'localhost';

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

/** A root password field that holds no hash: already locked, or never set. */
const HASHLESS = /^(?:[!*]+|!?\*LOCK\*)$/;

/**
 * Everything `deprovision` would change on the image at `root` with this configuration; with `user`, also the
 * admin accounts bootstate created and their sudoers drop-ins; with `waagentState`, WALinuxAgent's state.
 */
export async function planDeprovision(root: string, config: Config, options: PlanOptions): Promise<Plan> {
  const plan: Plan = { changes: [], notes: [], refused: [] };
  const removedHomes = options.user ? await adminUsers(root, config, plan) : new Set<string>();
  const { changes } = plan;

  for (const file of await regularFilesIn(root, config.host_keys.dir, HOST_KEY_FILE)) changes.push({ kind: 'remove', path: file, what: 'ssh host key' });

  const machineId = await readRegularInRoot(root, MACHINE_ID);
  if (machineId !== null && !['', 'uninitialized'].includes(machineId.trim())) changes.push({ kind: 'machine-id', path: MACHINE_ID });
  await hostname(root, plan);

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

  // The certificates first: the record that proves them bootstate's is among bootstate's state, removed after them.
  const waagent = await waagentChanges(root, config, { waagentState: options.waagentState === true });
  changes.push(...waagent.changes);
  plan.notes.push(...waagent.notes);
  plan.refused.push(...waagent.refused);
  changes.push(...(await bootstateState(root, config)));
  if (root === '/') {
    const pieces = await findFirewall(run);
    if (pieces.length > 0) changes.push({ kind: 'remove-firewall', pieces });
  }
  return { ...plan, changes: once(changes) };
}

/**
 * Each path removed once: a path two concerns name (WALinuxAgent's copy of the custom data is also WALinuxAgent's
 * state) or one inside a directory removed before it is left to the first change that removes it.
 */
function once(changes: Change[]): Change[] {
  const removed: Array<{ path: string; recursive: boolean }> = [];
  return changes.filter((change) => {
    if (change.kind !== 'remove') return true;
    if (removed.some((r) => r.path === change.path || (r.recursive && change.path.startsWith(`${r.path}/`)))) return false;
    removed.push({ path: change.path, recursive: change.recursive === true });
    return true;
  });
}

/** The accounts bootstate created, their sudoers drop-ins and account backups, into `plan`; returns their homes. */
async function adminUsers(root: string, config: Config, plan: Plan): Promise<Set<string>> {
  const users = await findAdminUsers(root, config.user_provisioners.sudoers_dir);
  const removedHomes = new Set<string>();
  const removed: string[] = [];
  for (const user of users) {
    if (user.inPasswd && user.created && user.uid !== 0) {
      plan.changes.push({ kind: 'remove-user', username: user.username, home: user.home });
      removed.push(user.username);
      if (user.home) removedHomes.add(path.posix.normalize(user.home));
    } else if (user.inPasswd) {
      plan.notes.push(`${user.username}: has a bootstate sudoers drop-in but was not created by bootstate (its /etc/passwd comment differs): account kept; remove it with userdel -r ${user.username} if it is the admin`);
    }
    for (const file of user.sudoers) plan.changes.push({ kind: 'remove', path: file, what: `sudoers drop-in of ${user.username}` });
  }
  if (removed.length > 0) plan.changes.push({ kind: 'account-backups', usernames: removed });
  if (users.length === 0) plan.notes.push('no account created by bootstate was found (no /etc/passwd entry with its comment, no 90-bootstate-* sudoers drop-in)');
  return removedHomes;
}

/** `/etc/hostname` back to `localhost` unless it says so already; a link there is refused, never followed. */
async function hostname(root: string, plan: Plan): Promise<void> {
  const entry = await entryAt(root, HOSTNAME_FILE);
  if (entry === null) return;
  if (!entry.isFile()) {
    plan.refused.push(`${HOSTNAME_FILE} is ${entry.isSymbolicLink() ? 'a symlink' : 'not a regular file'}: the build VM's name was not reset (it is never followed)`);
    return;
  }
  if ((await readRegularInRoot(root, HOSTNAME_FILE))?.trim() !== RESET_HOSTNAME) plan.changes.push({ kind: 'hostname', path: HOSTNAME_FILE });
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
