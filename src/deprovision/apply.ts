/**
 * Applies a deprovision plan (plan.ts) to the image at a root, one change at a time in the plan's order, and says
 * what each did. Files are removed by their own name (a link is removed, never followed); rewritten files keep
 * their owner, and replace the old one by rename so a crash leaves either the old or the new file.
 */
import { lstat, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { writeFileAtomic } from '../system/atomic.js';
import { run } from '../system/exec.js';
import { readRegularInRoot, resolveInRoot } from '../system/paths.js';
import type { Change } from './plan.js';
import { RESET_HOSTNAME, rootHasPassword, SHADOW_FILES } from './plan.js';

/** How a path in the image is shown: as it is on this system (under the root). */
export function shown(root: string, p: string): string {
  return root === '/' ? p : path.join(root, p);
}

/** One line saying what `change` will do, for the list shown before confirmation. */
export function describeChange(root: string, change: Change): string {
  switch (change.kind) {
    case 'remove':
      return `remove ${shown(root, change.path)}${change.recursive ? '/' : ''} (${change.what})`;
    case 'machine-id':
      return `write "uninitialized" to ${shown(root, change.path)} (the next boot gets a machine id of its own)`;
    case 'hostname':
      return `write "${RESET_HOSTNAME}" to ${shown(root, change.path)} (the build VM's name; a first boot names each VM)`;
    case 'account-backups':
      return `drop ${change.usernames.join(', ')} from the account files' backups (${ACCOUNT_FILES.map((f) => shown(root, `${f}-`)).join(', ')}): each that names them becomes a copy of its file`;
    case 'lock-root':
      return `lock root's password: replace its hash by "*" in ${change.paths.map((p) => shown(root, p)).join(' and ')} ${change.paths.includes('/etc/shadow-') ? '' : ` (and in the backup ${shown(root, '/etc/shadow-')} if one is written meanwhile)`}`;
    case 'empty-kvp':
      return `empty ${shown(root, change.path)} (KVP pool)`;
    case 'remove-firewall':
      return `remove the wireserver firewall's rules: ${change.pieces.map((piece) => piece.what).join(', ')}`;
    case 'remove-user':
      return `delete user ${change.username} and its home${change.home ? ` ${shown(root, change.home)}` : ''} (userdel -r)`;
  }
}

/** Applies one change and returns the lines saying what was done (each path removed, each file changed). */
export async function applyChange(root: string, change: Change): Promise<string[]> {
  switch (change.kind) {
    case 'remove':
      await rm(resolveInRoot(root, change.path, { followLast: false }), { recursive: change.recursive === true });
      return [`removed ${shown(root, change.path)}`];
    case 'machine-id': {
      const file = resolveInRoot(root, change.path);
      const info = await stat(file);
      await writeFileAtomic(file, 'uninitialized\n', { mode: 0o444, uid: info.uid, gid: info.gid });
      return [`wrote "uninitialized" to ${shown(root, change.path)}`];
    }
    case 'hostname': {
      const file = resolveInRoot(root, change.path, { followLast: false });
      const info = await lstat(file);
      if (!info.isFile()) throw new Error(`${shown(root, change.path)} is not a regular file now`);
      await writeFileAtomic(file, `${RESET_HOSTNAME}\n`, { mode: info.mode & 0o7777, uid: info.uid, gid: info.gid });
      return [`wrote "${RESET_HOSTNAME}" to ${shown(root, change.path)}`];
    }
    case 'account-backups':
      return scrubAccountBackups(root, change.usernames);
    case 'lock-root': {
      const lines: string[] = [];
      // Every shadow file, not only those planned: `userdel` (--user, applied first) writes a new /etc/shadow- that
      // copies the hash the plan saw in /etc/shadow.
      for (const p of SHADOW_FILES) {
        const text = await readRegularInRoot(root, p);
        if (!rootHasPassword(text)) continue;
        const file = resolveInRoot(root, p);
        const info = await stat(file);
        const locked = text!.split('\n').map((line) => (line.startsWith('root:') ? line.split(':').map((f, i) => (i === 1 ? '*' : f)).join(':') : line)).join('\n');
        await writeFileAtomic(file, locked, { mode: info.mode & 0o7777, uid: info.uid, gid: info.gid });
        lines.push(`locked root's password in ${shown(root, p)}`);
      }
      return lines;
    }
    case 'empty-kvp': {
      const { KvpStore } = await import('../kvp/store.js');
      const pool = new KvpStore({ path: resolveInRoot(root, change.path), lossy: true });
      const { records } = pool.info();
      pool.clear();
      return [`emptied ${shown(root, change.path)} (${records} KVP record${records === 1 ? '' : 's'})`];
    }
    case 'remove-user':
      return removeUser(root, change.username, change.home);
    case 'remove-firewall': {
      const { FIREWALL_SNAPSHOT, removeFirewall } = await import('../firewall/firewall.js');
      const removed = (await removeFirewall(run, change.pieces)).map((what) => `removed ${what}`);
      // Without its snapshot the monitor's re-check has nothing to put back.
      await rm(FIREWALL_SNAPSHOT, { force: true });
      return removed;
    }
  }
}

/** The account files shadow-utils edits, each with a backup `<file>-` holding its previous contents. */
export const ACCOUNT_FILES = ['/etc/passwd', '/etc/shadow', '/etc/group', '/etc/gshadow', '/etc/subuid', '/etc/subgid'];
/** Fields of a group or gshadow line listing user names (members; gshadow's administrators too). */
const MEMBER_FIELDS: Record<string, number[]> = { '/etc/group': [3], '/etc/gshadow': [2, 3] };

/** Whether a line of account file `file` names one of `users`: as the entry, or among a group's members. */
function namesUser(file: string, line: string, users: string[]): boolean {
  const fields = line.split(':');
  return users.includes(fields[0]!) || (MEMBER_FIELDS[file] ?? []).some((i) => (fields[i] ?? '').split(',').some((m) => users.includes(m)));
}

/**
 * After `userdel`, a backup holding a line that names a deleted account and that its file no longer has (the
 * account, its membership in a group) is replaced by a copy of the file, mode and owner kept: the backup is the
 * file as it was before userdel's edit, so the copy loses only that edit's removals. What the file itself still
 * holds (a group userdel kept) is not deprovision's to change.
 */
async function scrubAccountBackups(root: string, users: string[]): Promise<string[]> {
  const lines: string[] = [];
  for (const file of ACCOUNT_FILES) {
    const backup = `${file}-`;
    const old = await readRegularInRoot(root, backup);
    if (old === null) continue;
    const current = await readRegularInRoot(root, file);
    const kept = new Set((current ?? '').split('\n'));
    if (!old.split('\n').some((line) => !kept.has(line) && namesUser(file, line, users))) continue;
    if (current === null) throw new Error(`${shown(root, file)} is missing: ${shown(root, backup)} kept`);
    const target = resolveInRoot(root, backup, { followLast: false });
    const info = await lstat(target);
    if (!info.isFile()) throw new Error(`${shown(root, backup)} is not a regular file`);
    await writeFileAtomic(target, current, { mode: info.mode & 0o7777, uid: info.uid, gid: info.gid });
    lines.push(`rewrote ${shown(root, backup)} as a copy of ${shown(root, file)}`);
  }
  return lines;
}

/** `userdel -r` (with `-R ROOT` for an image: shadow-utils then edits the image's files as chroot would). */
async function removeUser(root: string, username: string, home: string | null): Promise<string[]> {
  const argv = root === '/' ? ['userdel', '-r', username] : ['userdel', '-R', root, '-r', username];
  const result = await run(argv, { timeoutMs: 60_000, allowFailure: true });
  // 12: the account is gone but its home could not be removed (userdel(8)).
  if (result.exitCode !== 0 && result.exitCode !== 12) throw new Error(`${argv.join(' ')} failed (exit ${result.exitCode ?? result.signal}): ${result.stderr.trim() || 'no message'}`);
  const lines = [`deleted user ${username} (${argv.join(' ')})`];
  if (home) {
    const left = await stat(resolveInRoot(root, home, { followLast: false })).then(() => true, () => false);
    // userdel leaves a home it does not own (exit 12): the account is gone, its keys and files would still ship.
    if (left) throw new Error(`${argv.join(' ')} deleted the account but left ${shown(root, home)}: ${result.stderr.trim() || 'no message'}`);
    lines.push(`removed ${shown(root, home)}`);
  }
  return lines;
}
