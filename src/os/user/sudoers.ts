/**
 * The admin's sudo rule (docs/protocol.md#sudoers): one drop-in per user in the sudoers directory, 0440 owned by root, checked
 * with `visudo -cf` before it replaces anything, so a bad rule can never lock out sudo. Which rule, if any, follows
 * `[user_provisioners] sudo` (sudoRuleFor).
 */
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { SudoPolicy } from '../../config/defaults.js';
import { BootstateError } from '../../core/errors.js';
import { sha256Hex } from '../../core/random.js';
import { SUDOERS_DROPIN_PREFIX } from './admin-users.js';
import { restoreContexts } from '../selinux.js';
import { writeFileAtomic } from '../../system/atomic.js';
import type { OsContext } from '../backends.js';
import { isCommandMissing } from '../../system/exec.js';
import { under } from '../../system/paths.js';
import type { StepResult } from '../provisioner.js';

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

/** The two rules bootstate writes: everything without a password, or everything after the user's own password. */
export type SudoRule = 'nopasswd' | 'password';

/**
 * The rule a policy gives, and why, for the log: `auto` is what WALinuxAgent gives an admin (no password
 * provisioned: nothing to type, so NOPASSWD; a password provisioned: sudo asks for it).
 *
 * @example
 *   sudoRuleFor('auto', false) // { rule: 'nopasswd', why: 'sudo = "auto", no password provisioned' }
 *   sudoRuleFor('none', true)  // { rule: null, why: 'sudo = "none"' }
 */
export function sudoRuleFor(policy: SudoPolicy, passwordProvided: boolean): { rule: SudoRule | null; why: string } {
  if (policy === 'auto') {
    return passwordProvided
      ? { rule: 'password', why: 'sudo = "auto", a password was provisioned' }
      : { rule: 'nopasswd', why: 'sudo = "auto", no password provisioned' };
  }
  return { rule: policy === 'none' ? null : policy, why: `sudo = "${policy}"` };
}

/**
 * The rule's line, the user name double-quoted as sudoers(5) allows for names with characters its grammar reserves,
 * e.g. `"azureuser" ALL=(ALL) NOPASSWD: ALL` or `"azureuser" ALL=(ALL) ALL`.
 */
export function sudoersRule(username: string, rule: SudoRule): string {
  const user = `"${username.replace(/["\\]/g, '\\$&')}"`;
  return rule === 'nopasswd' ? `${user} ALL=(ALL) NOPASSWD: ALL\n` : `${user} ALL=(ALL) ALL\n`;
}

export interface WriteSudoersOptions {
  /**
   * An image without visudo has no sudo: the rule is still written (a later sudo install honours it), unvalidated.
   * `warn` says so as a warning (the configuration asked for sudo); `note` only in the detail (`auto` did not).
   */
  withoutVisudo?: 'warn' | 'note';
  /** The rule goes in only once this has resolved (the user it names exists); rejected, nothing is written. */
  after?: Promise<unknown>;
}

/** Writes sudoersRule(user, rule) into `<sudoersDir>/<sudoersFileName(user)>`, validated with visudo first. */
export async function writeSudoers(
  username: string,
  rule: SudoRule,
  sudoersDir: string,
  context: OsContext,
  signal: AbortSignal,
  options: WriteSudoersOptions = {},
): Promise<StepResult> {
  const dir = under(context.root, sudoersDir);
  const file = path.join(dir, sudoersFileName(username));
  const warnings: string[] = [];
  let unvalidated = false;
  try {
    await mkdir(dir, { recursive: true, mode: 0o750 });
    await writeFileAtomic(file, `# Written by bootstate\n${sudoersRule(username, rule)}`, {
      mode: 0o440,
      after: options.after,
      uid: context.rootOwner.uid,
      gid: context.rootOwner.gid,
      validate: async (temp) => {
        try {
          await context.run(['visudo', '-cf', temp], { signal, timeoutMs: 30_000 });
        } catch (error) {
          if (!isCommandMissing(error)) throw error;
          unvalidated = true;
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
  warnings.push(...(await restoreContexts([file], context, signal)));
  const missing = 'visudo is not installed; sudoers drop-in not validated';
  if (unvalidated && (options.withoutVisudo ?? 'warn') === 'warn') warnings.unshift(missing);
  const note = unvalidated && options.withoutVisudo === 'note' ? ` (${missing})` : '';
  return { backend: 'sudoers.d', detail: `wrote ${file}${note}`, warnings };
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
