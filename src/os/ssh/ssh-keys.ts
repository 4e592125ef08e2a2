/**
 * Writes a user's authorized_keys: validated keys merged with the existing ones (deduplicated), `.ssh` 0700 and
 * the file 0600 owned by the user, every component opened with O_NOFOLLOW so a symlink planted in the home
 * directory is refused rather than followed (safe-fs.ts), and the file replaced atomically.
 */
import type { FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { BootstateError } from '../../core/errors.js';
import { under } from '../../system/paths.js';
import { openBase, openExistingFile, replaceFileIn, walkDirs } from '../../system/safe-fs.js';
import { validateSshKey } from '../validate.js';

const MAX_EXISTING_BYTES = 1024 * 1024;

export interface AuthorizedKeysTarget {
  username: string;
  uid: number;
  gid: number;
  /** The home directory as the system sees it (e.g. `/home/azureuser`). */
  home: string;
  /** Candidate files from sshd's configuration (absolute, as the system sees them). */
  paths: string[];
  /** Where the system's `/` is (tests use a temp dir). */
  root: string;
  /** Owner of directories created outside the home (default root). */
  rootOwner?: { uid: number; gid: number };
}

export interface AuthorizedKeysResult {
  path: string;
  added: number;
  total: number;
  /** What was changed so sshd accepts the file (e.g. a group-writable home made 0755). */
  warnings: string[];
}

/** Chooses the file to write: the first candidate inside the home, else the first one (sshd's config says so). */
export function chooseKeysFile(paths: string[], home: string): string {
  const inside = paths.find((p) => isInside(p, home));
  const chosen = inside ?? paths[0];
  if (!chosen) throw new BootstateError('SSH_KEYS_FAILED', 'no AuthorizedKeysFile candidate');
  return chosen;
}

/** Validates every key first (INVALID_SSH_KEY), then merges them into the user's authorized_keys file. */
export async function writeAuthorizedKeys(target: AuthorizedKeysTarget, keys: string[]): Promise<AuthorizedKeysResult> {
  const parsed = keys.map((k) => validateSshKey(k));
  const file = chooseKeysFile(target.paths, target.home);
  const inside = isInside(file, target.home);
  const base = inside ? target.home : '/';
  const relative = path.posix.relative(base, file).split('/');
  const name = relative.pop()!;
  const rootOwner = target.rootOwner ?? { uid: 0, gid: 0 };
  const owners = [target.uid, rootOwner.uid];
  const baseHandle = await openBase(under(target.root, base), inside ? owners : [rootOwner.uid]);
  const warnings: string[] = [];
  if (inside) await makeHomeStrict(baseHandle, target, warnings);
  const dir = await walkDirs(baseHandle, base, relative, {
    create: inside ? { uid: target.uid, gid: target.gid, mode: 0o700 } : { ...rootOwner, mode: 0o755 },
    allowedOwners: owners,
  });
  try {
    // sshd's StrictModes rejects a group- or world-writable .ssh; we own the decision to tighten it.
    if (inside && relative.length > 0) await dir.chmod(0o700);
    const existing = await readExisting(dir, name, file, owners);
    const seen = new Set(existing.map(identity).filter((id): id is string => id !== null));
    const lines = [...existing];
    let added = 0;
    for (const key of parsed) {
      const id = `${key.type} ${key.base64}`;
      if (seen.has(id)) continue;
      seen.add(id);
      lines.push(key.line);
      added++;
    }
    await replaceFileIn(dir, name, `${lines.join('\n')}\n`, 0o600, target);
    return { path: file, added, total: lines.filter((l) => identity(l) !== null).length, warnings };
  } finally {
    await dir.close();
  }
}

/**
 * sshd's StrictModes ignores authorized_keys under a home that is group- or world-writable. A home owned by the
 * user is theirs, given to them by provisioning: it loses those bits. One owned by anyone else (root included)
 * is not ours to change, and key logins would fail: refused with the reason.
 */
async function makeHomeStrict(home: FileHandle, target: AuthorizedKeysTarget, warnings: string[]): Promise<void> {
  const stat = await home.stat();
  const mode = stat.mode & 0o7777;
  if ((mode & 0o022) === 0) return;
  if (stat.uid !== target.uid) {
    await home.close();
    const why = `is writable by group or others (mode ${mode.toString(8).padStart(4, '0')}) and owned by uid ${stat.uid}, not ${target.username}: sshd's StrictModes would refuse every key login`;
    throw new BootstateError('SSH_KEYS_FAILED', `refusing ${target.home}: it ${why}`, { data: [['path', target.home], ['problem', why]] });
  }
  await home.chmod(mode & ~0o022);
  warnings.push(`${target.home} was writable by group or others (mode ${mode.toString(8).padStart(4, '0')}); made ${(mode & ~0o022).toString(8).padStart(4, '0')} so sshd's StrictModes accepts its keys`);
}

async function readExisting(dir: Awaited<ReturnType<typeof walkDirs>>, name: string, shown: string, owners: number[]): Promise<string[]> {
  const handle = await openExistingFile(dir, name, shown, owners);
  if (!handle) return [];
  try {
    const stat = await handle.stat();
    if (stat.size > MAX_EXISTING_BYTES) {
      throw new BootstateError('SSH_KEYS_FAILED', `${shown} is larger than ${MAX_EXISTING_BYTES} bytes`);
    }
    const text = (await handle.readFile()).toString('utf8');
    return text.split('\n').map((l) => l.replace(/\r$/, '')).filter((l) => l.trim().length > 0);
  } finally {
    await handle.close();
  }
}

/** `type base64` of a valid key line, or null for comments and lines we do not understand (kept as they are). */
function identity(line: string): string | null {
  if (line.trimStart().startsWith('#')) return null;
  try {
    const key = validateSshKey(line);
    return `${key.type} ${key.base64}`;
  } catch {
    return null;
  }
}

function isInside(p: string, dir: string): boolean {
  const rel = path.posix.relative(dir, p);
  return rel.length > 0 && !rel.startsWith('..') && !path.posix.isAbsolute(rel);
}
