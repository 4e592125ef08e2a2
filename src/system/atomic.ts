/**
 * Atomic file replacement: a temp file in the same directory, fsync, rename over the target, fsync the
 * directory. A reader (or a crash) sees either the old file or the whole new one, never a partial write.
 * A temp file never outlives the write: an error or an abort removes it, and so does the process exiting
 * while the write is in flight (a SIGTERM ends the run without waiting for the step it abandoned).
 */
import { constants } from 'node:fs';
import { open, readdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { randomBytes } from '../core/random.js';
import { removeOnExit } from './exit-cleanup.js';

export interface AtomicWriteOptions {
  mode: number;
  uid?: number;
  gid?: number;
  /** Runs against the finished temp file before it replaces the target (e.g. `visudo -cf`); throw to abort. */
  validate?: (tempPath: string) => Promise<void>;
  /**
   * The file goes in only once this has resolved: the write and its validation run beside the work it waits for
   * (a sudo rule beside the useradd that creates its user). If it rejects, the temp file is removed, the target is
   * left as it was, and its error is thrown.
   */
  after?: Promise<unknown>;
  /** Aborting it stops the write at its next step and removes the temp file; the target is left as it was. */
  signal?: AbortSignal;
}

/** The temp name for `name`: a leading dot and a dot inside keep sudoers.d and sshd_config.d/*.conf from reading it. */
export function tempNameFor(name: string): string {
  return `.${name}.${randomBytes(6).toString('hex')}.tmp`;
}

/**
 * Removes temp files a killed run left for `name` in `dir` (`dir` may be a /proc/self/fd path). Only one agent
 * runs at a time (the instance lock), so every such file is an orphan.
 */
export async function sweepTempFiles(dir: string, name: string): Promise<void> {
  const orphan = new RegExp(`^\\.${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\.[0-9a-f]{12}\\.tmp$`);
  let entries: string[];
  try {
    entries = await readdir(dir);
  } catch {
    return;
  }
  await Promise.all(entries.filter((entry) => orphan.test(entry)).map((entry) => rm(path.join(dir, entry), { force: true })));
}

/** Replaces `target` with `data` atomically, with the given mode and owner. */
export async function writeFileAtomic(target: string, data: string | Buffer, options: AtomicWriteOptions): Promise<void> {
  const dir = path.dirname(target);
  await sweepTempFiles(dir, path.basename(target));
  const temp = path.join(dir, tempNameFor(path.basename(target)));
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
  const { signal } = options;
  signal?.throwIfAborted();
  // Tracked before it exists: an exit while the open is in flight still removes what it creates.
  const forget = removeOnExit(temp);
  try {
    const handle = await open(temp, flags, options.mode);
    try {
      signal?.throwIfAborted();
      await handle.writeFile(data, { signal });
      await handle.chmod(options.mode);
      if (options.uid !== undefined) await handle.chown(options.uid, options.gid ?? options.uid);
      await handle.sync();
    } finally {
      await handle.close();
    }
    signal?.throwIfAborted();
    if (options.validate) await options.validate(temp);
    if (options.after) await options.after;
    signal?.throwIfAborted();
    await rename(temp, target);
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  } finally {
    forget();
  }
  await syncDir(dir);
}

/** Flushes a directory entry change (create, rename, unlink) to disk. */
export async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
