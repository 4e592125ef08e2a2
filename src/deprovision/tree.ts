/**
 * Reading the image at a root for a deprovision plan: every path is resolved inside the root as chroot would
 * (src/system/paths.ts), and the last component is never followed, so a link is seen as a link.
 */
import { lstat, readdir } from 'node:fs/promises';
import path from 'node:path';
import type { Stats } from 'node:fs';
import { resolveInRoot } from '../system/paths.js';

/** The entry at `p` itself (a link is not followed), or null when there is none. */
export async function entryAt(root: string, p: string): Promise<Stats | null> {
  return lstat(resolveInRoot(root, p, { followLast: false })).catch(() => null);
}

/** The names in directory `dir`, sorted; none when it is missing or not a directory. */
export async function namesIn(root: string, dir: string): Promise<string[]> {
  return (await readdir(resolveInRoot(root, dir)).catch(() => [] as string[])).sort();
}

/** Whether `p` is a regular file (a link to one is not). */
export async function isRegular(root: string, p: string): Promise<boolean> {
  return (await entryAt(root, p))?.isFile() ?? false;
}

/** Regular files in `dir` whose names match: a link (e.g. a history linked to /dev/null on purpose) is left alone. */
export async function regularFilesIn(root: string, dir: string, match: RegExp): Promise<string[]> {
  const files: string[] = [];
  for (const name of (await namesIn(root, dir)).filter((n) => match.test(n))) {
    const file = path.posix.join(dir, name);
    if (await isRegular(root, file)) files.push(file);
  }
  return files;
}

/** Directories (not links to one) in `dir` whose names match. */
export async function directoriesIn(root: string, dir: string, match: RegExp): Promise<string[]> {
  const found: string[] = [];
  for (const name of (await namesIn(root, dir)).filter((n) => match.test(n))) {
    const p = path.posix.join(dir, name);
    if ((await entryAt(root, p))?.isDirectory()) found.push(p);
  }
  return found;
}

/**
 * The pattern of the temporary files src/system/atomic.ts writes beside `name` (`.NAME.<12 hex>.tmp`): a write cut
 * short by a crash leaves one, holding what `name` was to hold.
 */
export function tempFilesOf(name: RegExp | string): RegExp {
  const inner = typeof name === 'string' ? name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') : name.source.replace(/^\^|\$$/g, '');
  return new RegExp(`^\\.(?:${inner})\\.[0-9a-f]{12}\\.tmp$`);
}
