/**
 * Reading an image under a root (`doctor`; the network step's stack detection and its readers of the image's own
 * configuration): every path resolved inside the root as chroot would (resolveInRoot), so a link in the image never
 * leads a reader to the host's files, and only regular files read, so a FIFO cannot block one.
 */
import { lstat, readdir, readlink, stat } from 'node:fs/promises';
import { readRegularInRoot, resolveInRoot } from './paths.js';

/** The text of regular file `p` in the image; null when it is absent, unreadable or not a regular file. */
export const read = readRegularInRoot;

/** Whether `p` exists in the image, links followed inside it. */
export async function exists(root: string, p: string): Promise<boolean> {
  try {
    await stat(resolveInRoot(root, p));
    return true;
  } catch {
    return false;
  }
}

/** The names in directory `p` of the image; none when it is absent or not a directory. */
export async function listDir(root: string, p: string): Promise<string[]> {
  try {
    return await readdir(resolveInRoot(root, p));
  } catch {
    return [];
  }
}

/** Whether `p` in the image is masked the way systemd reads it: a link to /dev/null, or an empty file. */
export async function masked(root: string, p: string): Promise<boolean> {
  try {
    const own = resolveInRoot(root, p, { followLast: false });
    const info = await lstat(own);
    if (info.isSymbolicLink()) return (await readlink(own)) === '/dev/null';
    return info.isFile() && info.size === 0;
  } catch {
    return false;
  }
}

/** Directories systemd links enabled units into, relative to the root. */
const WANTS_DIRS = ['etc/systemd/system/multi-user.target.wants', 'etc/systemd/system/cloud-init.target.wants', 'etc/systemd/system/sysinit.target.wants', 'etc/systemd/system/network-online.target.wants'];

/** The link that enables `unit` in the image, or null when none does. */
export async function unitEnabled(root: string, unit: string): Promise<string | null> {
  for (const dir of WANTS_DIRS) {
    if ((await listDir(root, dir)).includes(unit)) return `/${dir}/${unit}`;
  }
  return null;
}
