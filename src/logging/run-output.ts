/**
 * What a dry run and the demo print besides the states (src/observe/console.ts): the commands the real backend would
 * run as one could paste them into a shell, and the files written under a root.
 */
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

/** One argument as a POSIX shell reads it back: bare when safe, else single-quoted (`it's` → `'it'\''s'`). */
export function shellQuote(arg: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(arg)) return arg;
  return `'${arg.replace(/'/g, `'\\''`)}'`;
}

/** A command line, e.g. `['useradd', '-c', 'Ann B']` → `useradd -c 'Ann B'`. */
export function shellCommand(argv: readonly string[]): string {
  return argv.map(shellQuote).join(' ');
}

/** Every regular file under `root` as `MODE  path`, sorted, skipping the subtrees in `skip` (relative paths). */
export function listFiles(root: string, skip: readonly string[] = [], dir = root): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    const rel = relative(root, path);
    if (skip.includes(rel)) continue;
    const st = statSync(path);
    if (st.isDirectory()) out.push(...listFiles(root, skip, path));
    else out.push(`${(st.mode & 0o777).toString(8).padStart(4, '0')}  ${rel}`);
  }
  return out;
}
