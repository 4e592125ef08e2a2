/** Maps the absolute paths the OS backend touches onto a configurable root, so tests can use a temp tree. */
import { access } from 'node:fs/promises';
import path from 'node:path';

/** Resolves absolute path `p` under `root` (`/` leaves it unchanged); `..` can never climb above the root. */
export function under(root: string, p: string): string {
  const normal = path.posix.normalize(`/${p}`);
  return root === '/' ? normal : path.join(root, normal);
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
