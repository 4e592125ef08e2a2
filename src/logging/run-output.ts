/**
 * What a dry run and the demo print: each state as it is entered (with its tags and time since start), the
 * commands the real backend would run as one could paste them into a shell, and the files written under a root.
 */
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { InspectionEvent, StateValue } from 'xstate';
import { leafPaths } from '../core/state-path.js';

/** An inspect observer that prints each leaf state of the root actor when it is entered. */
export function statePrinter(out: (line: string) => void): (event: InspectionEvent) => void {
  const started = performance.now();
  let previous = new Set<string>();
  let rootSession: string | null = null;
  return (event) => {
    if (event.type !== '@xstate.snapshot') return;
    rootSession ??= event.rootId;
    if (event.actorRef.sessionId !== rootSession) return;
    const snapshot = event.snapshot as unknown as { value: StateValue; tags?: Set<string> };
    const now = new Set(leafPaths(snapshot.value));
    for (const leaf of now) {
      if (previous.has(leaf)) continue;
      const tags = [...(snapshot.tags ?? [])].join(' ');
      out(`${(performance.now() - started).toFixed(1).padStart(8)} ms  ${leaf}${tags ? `  [${tags}]` : ''}`);
    }
    previous = now;
  };
}

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
