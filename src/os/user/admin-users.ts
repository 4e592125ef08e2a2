/**
 * The admin accounts bootstate made on an image, found from its own records: the comment `useradd` was given
 * (user.ts) and the sudoers drop-ins it wrote (`90-bootstate-*`, sudoers.ts). `deprovision --user` removes them;
 * `doctor` warns when an image still carries one. Every path is resolved inside the root as chroot would.
 */
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { readRegularInRoot, resolveInRoot } from '../../system/paths.js';

/** The GECOS comment the useradd backend gives every account it creates. */
export const BOOTSTATE_USER_COMMENT = 'created by bootstate from provisioning metadata';

/** Prefix of the sudoers drop-ins bootstate writes (sudoersFileName). */
export const SUDOERS_DROPIN_PREFIX = '90-bootstate-';

export interface AdminUser {
  username: string;
  /** From the image's /etc/passwd; null when the account is gone. */
  uid: number | null;
  /** Whether its /etc/passwd comment is the one bootstate's useradd gives: bootstate created it. */
  created: boolean;
  /** Home from the image's /etc/passwd; null when the account is gone and only a drop-in names it. */
  home: string | null;
  /** Whether /etc/passwd still has the account. */
  inPasswd: boolean;
  /** The drop-ins (paths in the image) that grant it sudo. */
  sudoers: string[];
}

/** The user name in a bootstate drop-in's rule (`"<user>" ALL=…`), unquoted as sudoersRule quoted it. */
export function sudoersRuleUser(text: string): string | null {
  const m = /^"((?:[^"\\]|\\.)*)"\s+ALL=/m.exec(text);
  return m ? m[1]!.replace(/\\(.)/g, '$1') : null;
}

/** Every account bootstate made on the image at `root`, in name order. */
export async function findAdminUsers(root: string, sudoersDir: string): Promise<AdminUser[]> {
  const users = new Map<string, AdminUser>();
  const passwd = (await readRegularInRoot(root, '/etc/passwd')) ?? '';
  const entries = passwd.split('\n').filter((l) => !l.startsWith('#')).map((l) => l.split(':')).filter((f) => f.length >= 7);
  const byName = new Map(entries.map((f) => [f[0]!, f]));
  for (const f of entries) {
    if (f[4] === BOOTSTATE_USER_COMMENT) users.set(f[0]!, { username: f[0]!, uid: Number(f[2]), created: true, home: f[5]!, inPasswd: true, sudoers: [] });
  }
  const names = await readdir(resolveInRoot(root, sudoersDir)).catch(() => [] as string[]);
  for (const name of names.filter((n) => n.startsWith(SUDOERS_DROPIN_PREFIX)).sort()) {
    const file = path.posix.join(sudoersDir, name);
    const username = sudoersRuleUser((await readRegularInRoot(root, file)) ?? '');
    if (username === null) continue;
    const entry = byName.get(username);
    const user = users.get(username) ?? { username, uid: entry ? Number(entry[2]) : null, created: false, home: entry?.[5] ?? null, inPasswd: entry !== undefined, sudoers: [] };
    user.sudoers.push(file);
    users.set(username, user);
  }
  return [...users.values()].sort((a, b) => (a.username < b.username ? -1 : a.username > b.username ? 1 : 0));
}
