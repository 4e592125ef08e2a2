/**
 * Walking and creating directories without following symlinks. Node has no openat(2), so each step opens
 * `/proc/self/fd/<dirfd>/<name>` with O_NOFOLLOW: the magic link resolves to the directory we already hold,
 * and only the final name is looked up, so a symlink planted anywhere on the way is refused, not followed.
 */
import { constants, type Stats } from 'node:fs';
import { mkdir, open, rename, rm, type FileHandle } from 'node:fs/promises';
import { BootstateError } from '../core/errors.js';
import { sweepTempFiles, tempNameFor } from './atomic.js';

export interface Owner {
  uid: number;
  gid: number;
}

export interface WalkOptions {
  /** Owner and mode of directories created on the way. */
  create: Owner & { mode: number };
  /** uids allowed to own an existing directory on the way (e.g. the user and root). */
  allowedOwners: number[];
}

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;

/** The path naming `name` inside the directory open as `dir`, resolved without following a final symlink. */
export function inDir(dir: FileHandle, name: string): string {
  return `/proc/self/fd/${dir.fd}/${name}`;
}

/** Opens directory `base` (its last component must not be a symlink) and checks who owns it. */
export async function openBase(base: string, allowedOwners: number[]): Promise<FileHandle> {
  const handle = await openDir(base, base);
  await checkOwner(handle, base, allowedOwners);
  return handle;
}

/**
 * Descends from the open directory `base` through `components`, creating missing ones, and returns the last
 * directory open. The caller owns (and must close) the returned handle; `base` is closed here.
 */
export async function walkDirs(base: FileHandle, baseName: string, components: string[], options: WalkOptions): Promise<FileHandle> {
  let current = base;
  let shown = baseName;
  try {
    for (const name of components) {
      shown = `${shown.replace(/\/$/, '')}/${name}`;
      const target = inDir(current, name);
      let created = false;
      try {
        await mkdir(target, { mode: options.create.mode });
        created = true;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
      const next = await openDir(target, shown);
      await current.close();
      current = next;
      if (created) {
        await current.chown(options.create.uid, options.create.gid);
        await current.chmod(options.create.mode);
      } else {
        await checkOwner(current, shown, options.allowedOwners);
      }
    }
    return current;
  } catch (error) {
    await current.close().catch(() => undefined);
    throw error;
  }
}

/**
 * Replaces file `name` in the open directory `dir` with `text`, owned by `owner` with `mode`: a temporary file made
 * with O_EXCL|O_NOFOLLOW, written and synced, then renamed over the name, and the directory synced. rename(2)
 * replaces a symlink at the destination instead of following it; a failed write leaves the old file.
 */
export async function replaceFileIn(dir: FileHandle, name: string, text: string, mode: number, owner: Owner): Promise<void> {
  await sweepTempFiles(inDir(dir, '.'), name);
  const temp = tempNameFor(name);
  const handle = await open(inDir(dir, temp), constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    try {
      await handle.chown(owner.uid, owner.gid);
      await handle.chmod(mode);
      await handle.writeFile(text);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(inDir(dir, temp), inDir(dir, name));
  } catch (error) {
    await rm(inDir(dir, temp), { force: true });
    throw error;
  }
  await dir.sync();
}

/** Opens regular file `name` in `dir` for reading, refusing symlinks, FIFOs and foreign owners; null if absent. */
export async function openExistingFile(dir: FileHandle, name: string, shown: string, allowedOwners: number[]): Promise<FileHandle | null> {
  let handle: FileHandle;
  try {
    handle = await open(inDir(dir, name), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null;
    if (code === 'ELOOP') throw refused(shown, 'is a symlink');
    throw error;
  }
  const stat = await handle.stat();
  if (!stat.isFile()) {
    await handle.close();
    throw refused(shown, 'is not a regular file');
  }
  // Another name for the same inode could be anyone's file: merging from it would copy that file into ours.
  if (stat.nlink > 1) {
    await handle.close();
    throw refused(shown, `is a hard link (${stat.nlink} names)`);
  }
  if (!allowedOwners.includes(stat.uid)) {
    await handle.close();
    throw refused(shown, `is owned by uid ${stat.uid}`);
  }
  return handle;
}

async function openDir(target: string, shown: string): Promise<FileHandle> {
  try {
    return await open(target, DIR_FLAGS);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ELOOP') throw refused(shown, 'is a symlink');
    if (code === 'ENOTDIR') throw refused(shown, 'is a symlink or not a directory');
    throw error;
  }
}

async function checkOwner(handle: FileHandle, shown: string, allowed: number[]): Promise<Stats> {
  const stat = await handle.stat();
  if (!allowed.includes(stat.uid)) {
    await handle.close();
    throw refused(shown, `is owned by uid ${stat.uid}`);
  }
  return stat;
}

function refused(shown: string, why: string): BootstateError {
  return new BootstateError('SSH_KEYS_FAILED', `refusing ${shown}: it ${why}`, {
    data: [['path', shown], ['problem', why]],
  });
}
