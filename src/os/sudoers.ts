/**
 * The optional passwordless-sudo rule (spec §8.4): one drop-in per user in the sudoers directory, 0440 owned by
 * root, checked with `visudo -cf` before it replaces anything, so a bad rule can never lock out sudo.
 */
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { BootstateError } from '../errors.js';
import { sha256Hex } from '../random.js';
import { SUDOERS_DROPIN_PREFIX } from './admin-users.js';
import { writeFileAtomic } from './atomic.js';
import type { OsContext } from './backends.js';
import { isCommandMissing } from './exec.js';
import { under } from './paths.js';
import type { StepResult } from './provisioner.js';

/**
 * The drop-in's name, e.g. `90-bootstate-azureuser`: sudo's includedir silently skips names containing a dot or
 * ending in `~`, so any character but letters, digits, `_` and `-` becomes `_`, and a name that had to change
 * gains a hash of the original so that `john.doe` and `john_doe` never share a file.
 */
export function sudoersFileName(username: string): string {
  const safe = username.replace(/[^A-Za-z0-9_-]/g, '_');
  if (safe === username) return `${SUDOERS_DROPIN_PREFIX}${safe}`;
  return `${SUDOERS_DROPIN_PREFIX}${safe}-${sha256Hex(username).slice(0, 8)}`;
}

/** The rule: the user name double-quoted, as sudoers(5) allows for names with characters its grammar reserves. */
export function sudoersRule(username: string): string {
  return `"${username.replace(/["\\]/g, '\\$&')}" ALL=(ALL) NOPASSWD: ALL\n`;
}

/** Writes `"<user>" ALL=(ALL) NOPASSWD: ALL` into `<sudoersDir>/<sudoersFileName(user)>`, validated with visudo. */
export async function writeSudoers(username: string, sudoersDir: string, context: OsContext, signal: AbortSignal): Promise<StepResult> {
  const dir = under(context.root, sudoersDir);
  const file = path.join(dir, sudoersFileName(username));
  const warnings: string[] = [];
  try {
    await mkdir(dir, { recursive: true, mode: 0o750 });
    await writeFileAtomic(file, `# Written by bootstate\n${sudoersRule(username)}`, {
      mode: 0o440,
      uid: context.rootOwner.uid,
      gid: context.rootOwner.gid,
      validate: async (temp) => {
        try {
          await context.run(['visudo', '-cf', temp], { signal, timeoutMs: 30_000 });
        } catch (error) {
          if (!isCommandMissing(error)) throw error;
          warnings.push('visudo is not installed; sudoers drop-in not validated');
        }
      },
    });
  } catch (error) {
    throw new BootstateError('SUDOERS_FAILED', `cannot write ${file}: ${(error as Error).message}`, {
      data: [['path', file], ['error', (error as Error).message]],
      cause: error,
    });
  }
  const main = await readFile(under(context.root, '/etc/sudoers'), 'utf8').catch(() => null);
  if (main !== null && !includesSudoersDir(main, sudoersDir)) {
    warnings.push(`/etc/sudoers has no @includedir ${sudoersDir}; the rule may be ignored`);
  }
  return { backend: 'sudoers.d', detail: `wrote ${file}`, warnings };
}

/** Whether sudoers text includes `dir` (`@includedir` or the older `#includedir` spelling). */
export function includesSudoersDir(sudoers: string, dir: string): boolean {
  const norm = (p: string) => path.posix.normalize(p).replace(/(.)\/$/, '$1');
  const want = norm(dir);
  return sudoers.split('\n').some((line) => {
    const m = /^\s*[@#]includedir\s+(\S+)\s*$/.exec(line);
    return m !== null && norm(m[1]!) === want;
  });
}
