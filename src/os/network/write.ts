/**
 * Puts a backend's rendered files on disk and takes away bootstate's earlier ones that no longer belong, reporting
 * what changed so the backend's apply touches only those interfaces. Every directory on the way is opened without
 * following a symlink (a link planted anywhere under the root is refused), each file is replaced atomically (a
 * temp file renamed over the name, so a link planted at the name is replaced, never followed), and a file whose
 * text and mode are already the rendered ones is left alone. Only files in `owned` (the backend's ownedFiles:
 * bootstate's own, recognised by their name and header) are ever removed.
 */
import { constants } from 'node:fs';
import { lstat, open, unlink, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { under } from '../../system/paths.js';
import { inDir, openBase, openExistingFile, replaceFileIn, walkDirs, type Owner } from '../../system/safe-fs.js';
import type { FileChange, RenderedFile } from './types.js';

export interface WriteOptions {
  /**
   * Runs before a file of bootstate's that is there now is replaced or removed, with the text it has until then.
   * ifupdown needs it: `ifdown` reads an interface's stanza to take it down, so it must run while the old one is
   * still on disk.
   */
  beforeChange?: (file: string, previous: string) => Promise<void>;
  /** Owner of the files and of directories made on the way; root. */
  owner?: Owner;
}

const ROOT: Owner = { uid: 0, gid: 0 };
const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;

/**
 * Writes `rendered` under `root` and removes the files of `owned` that are not rendered any more.
 *
 * @example await writeNetworkFiles('/', backend.render(plan, skip), await backend.ownedFiles('/'))
 *   // { written: [the eth1 file], removed: ['/etc/systemd/network/50-bootstate-eth2.network'], unchanged: [the eth0 file] }
 */
export async function writeNetworkFiles(root: string, rendered: RenderedFile[], owned: string[], options: WriteOptions = {}): Promise<FileChange> {
  const owner = options.owner ?? ROOT;
  const change: FileChange = { written: [], removed: [], unchanged: [] };
  const keep = new Set(rendered.map((file) => normal(file.path)));
  for (const file of rendered) {
    if (await writeOne(root, file, owner, options.beforeChange)) change.written.push(file);
    else change.unchanged.push(file.path);
  }
  for (const file of new Set(owned.map(normal))) {
    if (keep.has(file)) continue;
    if (await removeOne(root, file, owner, options.beforeChange)) change.removed.push(file);
  }
  return change;
}

const normal = (p: string) => path.posix.normalize(`/${p}`);

/** Replaces one file unless it already holds the rendered text with the rendered mode; true when it wrote. */
async function writeOne(root: string, file: RenderedFile, owner: Owner, before: WriteOptions['beforeChange']): Promise<boolean> {
  const target = normal(file.path);
  const base = await openBase(under(root, '/'), [owner.uid]);
  const dir = await walkDirs(base, under(root, '/'), components(path.posix.dirname(target)), {
    create: { ...owner, mode: 0o755 },
    allowedOwners: [owner.uid],
  });
  try {
    const name = path.posix.basename(target);
    const now = await readOurs(dir, name, under(root, target), owner);
    if (now && now.text === file.text && now.mode === file.mode) return false;
    if (now && before) await before(target, now.text);
    await replaceFileIn(dir, name, file.text, file.mode, owner);
    return true;
  } finally {
    await dir.close();
  }
}

/** Removes one earlier file of bootstate's (a regular file or a link at its name, never what a link points to). */
async function removeOne(root: string, file: string, owner: Owner, before: WriteOptions['beforeChange']): Promise<boolean> {
  const dir = await openExistingDir(root, path.posix.dirname(file));
  if (!dir) return false;
  try {
    const name = path.posix.basename(file);
    const info = await lstat(inDir(dir, name)).catch(() => null);
    if (!info || !(info.isFile() || info.isSymbolicLink())) return false;
    const now = info.isFile() ? await readOurs(dir, name, under(root, file), owner) : null;
    if (now && before) await before(file, now.text);
    await unlink(inDir(dir, name));
    await dir.sync();
    return true;
  } finally {
    await dir.close();
  }
}

/** The text and mode of our file `name` in `dir`; null when absent or not something bootstate could have written. */
async function readOurs(dir: FileHandle, name: string, shown: string, owner: Owner): Promise<{ text: string; mode: number } | null> {
  let handle: FileHandle | null;
  try {
    handle = await openExistingFile(dir, name, shown, [owner.uid]);
  } catch {
    // A link, a second name of another file, or someone else's: replaced (rename never follows it), never read.
    return null;
  }
  if (!handle) return null;
  try {
    const stat = await handle.stat();
    return { text: await handle.readFile('utf8'), mode: stat.mode & 0o7777 };
  } finally {
    await handle.close();
  }
}

/** Opens directory `dir` under `root` one component at a time without following links; null when it is not there. */
async function openExistingDir(root: string, dir: string): Promise<FileHandle | null> {
  let current = await open(under(root, '/'), DIR_FLAGS);
  try {
    for (const name of components(dir)) {
      const next = await open(inDir(current, name), DIR_FLAGS);
      await current.close();
      current = next;
    }
    return current;
  } catch (error) {
    await current.close().catch(() => undefined);
    const code = (error as NodeJS.ErrnoException).code;
    // Missing: nothing of ours to remove. A link or a file on the way: not the directory we wrote into.
    if (code === 'ENOENT' || code === 'ELOOP' || code === 'ENOTDIR') return null;
    throw error;
  }
}

const components = (p: string) => p.split('/').filter((c) => c !== '' && c !== '.');
