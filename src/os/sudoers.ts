/**
 * The optional passwordless-sudo rule (spec §8.4): one drop-in per user in the sudoers directory, 0440 owned by
 * root, checked with `visudo -cf` before it replaces anything, so a bad rule can never lock out sudo.
 */
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { BootstateError } from '../errors.js';
import { writeFileAtomic } from './atomic.js';
import type { OsContext } from './backends.js';
import { isCommandMissing } from './exec.js';
import { under } from './paths.js';
import type { StepResult } from './provisioner.js';

/** The drop-in's name: no dot, since sudo's includedir skips names with one. */
export function sudoersFileName(username: string): string {
  return `90-bootstate-${username.replace(/\$$/, '_')}`;
}

/** Writes `<user> ALL=(ALL) NOPASSWD: ALL` into `<sudoersDir>/90-bootstate-<user>`, validated with visudo. */
export async function writeSudoers(username: string, sudoersDir: string, context: OsContext, signal: AbortSignal): Promise<StepResult> {
  const dir = under(context.root, sudoersDir);
  const file = path.join(dir, sudoersFileName(username));
  const warnings: string[] = [];
  try {
    await mkdir(dir, { recursive: true, mode: 0o750 });
    await writeFileAtomic(file, `# Written by bootstate\n${username} ALL=(ALL) NOPASSWD: ALL\n`, {
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
  const want = path.posix.normalize(dir);
  return sudoers.split('\n').some((line) => {
    const m = /^\s*[@#]includedir\s+(\S+)\s*$/.exec(line);
    return m !== null && path.posix.normalize(m[1]!) === want;
  });
}
