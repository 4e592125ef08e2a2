/**
 * Where the goal state's certificates land: every certificate as `/var/lib/waagent/<THUMBPRINT>.crt` (0644) and
 * its private key as `.prv` (0600), root's, in WALinuxAgent's 0700 directory, where applications and extensions
 * written for it look; and each `KeyPairs` private key at its path in the user's home (0600, the user's, with
 * `<path>.pub` 0644 beside it). Files are replaced atomically and never through a symlink. The names placed in
 * /var/lib/waagent are recorded first in bootstate's data directory: they are how `deprovision` proves those files
 * are bootstate's (WALinuxAgent writes the same names for its own).
 */
import { mkdir, chmod, lstat } from 'node:fs/promises';
import path from 'node:path';
import { BootstateError, escapeValue } from '../../core/errors.js';
import { writeFileAtomic } from '../../system/atomic.js';
import { readRegularInRoot, under } from '../../system/paths.js';
import { openBase, replaceFileIn, walkDirs, type Owner } from '../../system/safe-fs.js';

/** WALinuxAgent's directory, where its certificates are looked for. */
export const WAAGENT_DIR = '/var/lib/waagent';
/** Where WALinuxAgent is installed when it is (the `auto` placement places only without it). */
export const WAAGENT_PROGRAMS = ['/usr/sbin/waagent', '/usr/bin/waagent', '/usr/local/sbin/waagent'];

export interface PlacedCertificate {
  thumbprint: string;
  certificatePem: string;
  /** A secret: never logged. */
  privateKeyPem?: string;
}

/** The name of the file in the data directory listing what bootstate placed in /var/lib/waagent, one name a line. */
export const PLACED_RECORD = 'waagent-certificates';
/** The names bootstate gives what it places: the thumbprint as Azure writes it, then `.crt` or `.prv`. */
export const PLACED_NAME = /^[0-9A-F]{40}\.(?:crt|prv)$/;
const RECORD_HEADER = '# Files bootstate placed in /var/lib/waagent from the goal state; bootstate deprovision removes them.\n';

/** The names a record lists (only names bootstate's writer gives: a line naming anything else is not read). */
export function placedNames(record: string): string[] {
  return record.split('\n').filter((line) => PLACED_NAME.test(line));
}

/**
 * Writes each certificate (and key) under `<root>/var/lib/waagent` and returns the names written. With `record`
 * (the data directory, as configured), their names are added to its record before any of them is written, so no
 * file of ours exists that the record does not name.
 */
export async function placeCertificates(
  root: string,
  owner: Owner,
  certificates: PlacedCertificate[],
  options: { signal?: AbortSignal; record?: string } = {},
): Promise<string[]> {
  const { signal } = options;
  const dir = under(root, WAAGENT_DIR);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const stat = await lstat(dir);
  if (!stat.isDirectory()) throw failed(`${WAAGENT_DIR} is not a directory`);
  await chmod(dir, 0o700);
  const valid = certificates.filter((certificate) => /^[0-9A-F]{40}$/.test(certificate.thumbprint));
  if (options.record !== undefined) {
    const names = valid.flatMap((c) => [`${c.thumbprint}.crt`, ...(c.privateKeyPem ? [`${c.thumbprint}.prv`] : [])]);
    await recordPlaced(options.record, names, owner, signal);
  }
  const written: string[] = [];
  for (const certificate of valid) {
    await writeFileAtomic(path.join(dir, `${certificate.thumbprint}.crt`), certificate.certificatePem, { mode: 0o644, ...owner, signal });
    written.push(`${certificate.thumbprint}.crt`);
    if (certificate.privateKeyPem) {
      await writeFileAtomic(path.join(dir, `${certificate.thumbprint}.prv`), certificate.privateKeyPem, { mode: 0o600, ...owner, signal });
      written.push(`${certificate.thumbprint}.prv`);
    }
  }
  return written;
}

/** Adds `names` to the record in `dataDir` (0600 in a 0700 directory), keeping the names it already lists. */
async function recordPlaced(dataDir: string, names: string[], owner: Owner, signal?: AbortSignal): Promise<void> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const file = path.join(dataDir, PLACED_RECORD);
  const known = placedNames((await readRegularInRoot('/', file)) ?? '');
  const all = [...new Set([...known, ...names])];
  await writeFileAtomic(file, `${RECORD_HEADER}${all.map((name) => `${name}\n`).join('')}`, { mode: 0o600, ...owner, signal });
}

export interface KeyPairTarget {
  uid: number;
  gid: number;
  /** The user's home as the system sees it. */
  home: string;
  root: string;
}

/**
 * Where a `KeyPair`'s `Path` puts the key: `$HOME` stands for `/home` as in WALinuxAgent, an empty path is
 * `~/.ssh/id_rsa`, and a path outside the user's home is refused (the key is the user's).
 */
export function keyPairPath(raw: string, home: string): string {
  const expanded = raw.trim() === '' ? path.posix.join(home, '.ssh/id_rsa') : path.posix.normalize(raw.trim().replace('$HOME', '/home'));
  const rel = path.posix.relative(home, expanded);
  if (!path.posix.isAbsolute(expanded) || rel === '' || rel.startsWith('..') || path.posix.isAbsolute(rel)) {
    throw failed(`key pair path ${escapeValue(raw, 80)} is not inside ${home}`);
  }
  return expanded;
}

/** Installs a private key (0600) and its OpenSSH public line (`.pub`, 0644) for the user; directories made 0700, theirs. */
export async function installKeyPair(target: KeyPairTarget, file: string, privateKeyPem: string, publicKeyLine: string): Promise<void> {
  const components = path.posix.relative(target.home, file).split('/');
  const name = components.pop()!;
  const base = await openBase(under(target.root, target.home), [target.uid, 0]);
  const dir = await walkDirs(base, target.home, components, { create: { uid: target.uid, gid: target.gid, mode: 0o700 }, allowedOwners: [target.uid, 0] });
  try {
    await replaceFileIn(dir, name, privateKeyPem, 0o600, target);
    await replaceFileIn(dir, `${name}.pub`, `${publicKeyLine}\n`, 0o644, target);
  } finally {
    await dir.close();
  }
}

function failed(problem: string): BootstateError {
  return new BootstateError('CERTIFICATES_FAILED', problem, { data: [['problem', problem]] });
}
