/** Maps the absolute paths the OS backend touches onto a configurable root, so tests can use a temp tree. */
import { constants, lstatSync, readlinkSync } from 'node:fs';
import { access, open } from 'node:fs/promises';
import path from 'node:path';

/** Resolves absolute path `p` under `root` (`/` leaves it unchanged); `..` can never climb above the root. */
export function under(root: string, p: string): string {
  const normal = path.posix.normalize(`/${p}`);
  return root === '/' ? normal : path.join(root, normal);
}

/** Linux's MAXSYMLINKS: more links than this on one lookup is ELOOP. */
const MAX_LINKS = 40;

const components = (p: string) => p.split('/').filter((c) => c !== '' && c !== '.');

/**
 * The path on this system of path `p` inside the image at `root`, resolved as the kernel would after `chroot(root)`:
 * every symlink on the way is followed with its target read inside the root (an absolute target starts again at
 * the root), and `..` never climbs above it, so nothing the image says can lead to the host's files. Unlike `under`,
 * which joins lexically, this is for reading an image that is not the running system (`doctor --root`).
 *
 * The last component is followed too, as stat(2) and open(2) do, unless `followLast` is false (as lstat(2)). A path
 * through a missing component or a non-directory comes back unresolved from there on, so it does not exist here
 * either (ENOENT, ENOTDIR). Throws an ELOOP error after 40 links, as the kernel does.
 *
 * @example resolveInRoot('/mnt/image', '/etc/bootstate/bootstate.toml')
 *   // '/mnt/image/etc/passwd' when the image links that file to /etc/passwd
 */
export function resolveInRoot(root: string, p: string, options: { followLast?: boolean } = {}): string {
  const followLast = options.followLast ?? true;
  const done: string[] = []; // components below root resolved so far: each an existing directory, not a link
  const todo = components(p);
  const onHost = (parts: string[]) => path.join(root, ...parts);
  let links = 0;
  while (todo.length > 0) {
    const name = todo.shift()!;
    if (name === '..') {
      done.pop();
      continue;
    }
    const here = onHost([...done, name]);
    // What follows a missing component or a non-directory cannot exist; dropping its `..` keeps it from naming
    // something that does (path.join would cancel `missing/..`) or something above the root.
    const unresolvable = () => onHost([...done, name, ...todo.filter((c) => c !== '..')]);
    let info;
    try {
      info = lstatSync(here);
    } catch {
      return unresolvable();
    }
    const last = todo.length === 0;
    if (info.isSymbolicLink() && (followLast || !last)) {
      if (++links > MAX_LINKS) throw Object.assign(new Error(`${onHost([...done, name])}: too many levels of symbolic links`), { code: 'ELOOP' });
      const target = readlinkSync(here);
      if (target.startsWith('/')) done.length = 0;
      todo.unshift(...components(target));
      continue;
    }
    if (!last && !info.isDirectory()) return unresolvable();
    done.push(name);
  }
  return onHost(done);
}

/** Whether `p` exists (any type; a dangling symlink does not). */
export async function exists(p: string): Promise<boolean> {
  try {
    await access(p);
    return true;
  } catch {
    return false;
  }
}

/**
 * The text of regular file `p` in the image at `root` (resolved with resolveInRoot); null when it is absent,
 * unreadable or not a regular file. Opened non-blocking, so a FIFO planted in the image cannot stall the reader.
 */
export async function readRegularInRoot(root: string, p: string): Promise<string | null> {
  try {
    const handle = await open(resolveInRoot(root, p), constants.O_RDONLY | constants.O_NONBLOCK);
    try {
      return (await handle.stat()).isFile() ? await handle.readFile('utf8') : null;
    } finally {
      await handle.close();
    }
  } catch {
    return null;
  }
}
